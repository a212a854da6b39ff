"""The fsspec filesystem (protocol smb3) against smbd."""

import os

import pytest

fsspec = pytest.importorskip("fsspec")

from conftest import pattern  # noqa: E402

from smb3.fsspec import SMB3FileSystem  # noqa: E402


@pytest.fixture
def opts(server):
    return dict(
        username=server["username"], password=server["password"], domain=server["domain"]
    )


@pytest.fixture
def fs(server, opts):
    return fsspec.filesystem("smb3", host=server["host"], **opts)


def test_the_entry_point_registers_smb3(fs):
    assert isinstance(fs, SMB3FileSystem)
    assert fsspec.get_filesystem_class("smb3") is SMB3FileSystem


def test_ls_info_open_put_get(fs, server, rdir, tmp_path):
    d, local_dir = rdir
    base = f"/{server['share']}/{d}"
    fs.makedirs(f"{base}/sub/deeper", exist_ok=True)
    with fs.open(f"{base}/a.txt", "wb") as f:
        f.write(b"alpha")
    with fs.open(f"{base}/b.txt", "w") as f:
        f.write("beta\n")
    info = fs.info(f"{base}/a.txt")
    assert info["type"] == "file" and info["size"] == 5
    assert info["name"] == f"{base}/a.txt"
    assert fs.info(f"{base}/sub")["type"] == "directory"
    listing = fs.ls(base, detail=True)
    assert [e["name"] for e in listing] == [f"{base}/a.txt", f"{base}/b.txt", f"{base}/sub"]
    assert {e["name"]: e["type"] for e in listing}[f"{base}/sub"] == "directory"
    assert fs.ls(base, detail=False) == [e["name"] for e in listing]
    assert fs.cat_file(f"{base}/a.txt") == b"alpha"
    assert fs.cat_file(f"{base}/a.txt", start=1, end=3) == b"lp"
    assert fs.exists(f"{base}/a.txt") and not fs.exists(f"{base}/zzz")
    assert fs.isdir(f"{base}/sub") and fs.isfile(f"{base}/b.txt")
    with pytest.raises(FileNotFoundError):
        fs.info(f"{base}/zzz")
    # put/get through the library's multichannel copy.
    data = pattern(3 * 1024 * 1024 + 5, seed=5)
    lp = tmp_path / "p.bin"
    lp.write_bytes(data)
    fs.put_file(str(lp), f"{base}/p.bin")
    with open(os.path.join(local_dir, "p.bin"), "rb") as f:
        assert f.read() == data
    out = tmp_path / "g.bin"
    fs.get_file(f"{base}/p.bin", str(out))
    assert out.read_bytes() == data
    # Recursive get and put (fsspec's walking over ls/info).
    fs.get(f"{base}/sub", str(tmp_path / "gotsub"), recursive=True)
    assert (tmp_path / "gotsub" / "deeper").is_dir()
    # cp (server-side), mv, rm.
    fs.cp_file(f"{base}/p.bin", f"{base}/q.bin")
    assert fs.cat_file(f"{base}/q.bin") == data
    fs.mv(f"{base}/q.bin", f"{base}/sub/r.bin")
    assert not fs.exists(f"{base}/q.bin") and fs.size(f"{base}/sub/r.bin") == len(data)
    fs.rm(f"{base}/sub", recursive=True)
    assert not fs.exists(f"{base}/sub")
    fs.rm_file(f"{base}/p.bin")
    assert sorted(os.listdir(local_dir)) == ["a.txt", "b.txt"]
    assert fs.modified(f"{base}/a.txt").year >= 2020


def test_fsspec_open_by_url(server, opts, rdir):
    d, local_dir = rdir
    url = f"smb3://{server['host']}/{server['share']}/{d}/u.csv"
    with fsspec.open(url, "wt", **opts) as f:
        f.write("x,y\n1,2\n")
    with fsspec.open(url, "rt", **opts) as f:
        assert f.read() == "x,y\n1,2\n"
    with open(os.path.join(local_dir, "u.csv")) as f:
        assert f.read() == "x,y\n1,2\n"
    assert SMB3FileSystem._strip_protocol(url) == f"/{server['share']}/{d}/u.csv"
    kw = SMB3FileSystem._get_kwargs_from_urls(url)
    assert kw["host"] == server["host"]


def test_pandas_reads_csv_through_fsspec(server, opts, rdir):
    pd = pytest.importorskip("pandas")
    d, _ = rdir
    url = f"smb3://{server['host']}/{server['share']}/{d}/p.csv"
    pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]}).to_csv(
        url, index=False, storage_options=opts
    )
    df = pd.read_csv(url, storage_options=opts)
    assert list(df["a"]) == [1, 2, 3]


def test_pandas_reads_and_writes_parquet_through_fsspec(server, opts, rdir):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    d, local_dir = rdir
    url = f"smb3://{server['host']}/{server['share']}/{d}/p.parquet"
    df = pd.DataFrame({"n": list(range(10_000)), "s": [f"row {i}" for i in range(10_000)]})
    df.to_parquet(url, storage_options=opts)
    # What landed on the server is a real Parquet file (its magic at both ends).
    with open(os.path.join(local_dir, "p.parquet"), "rb") as f:
        raw = f.read()
    assert raw[:4] == b"PAR1" and raw[-4:] == b"PAR1"
    back = pd.read_parquet(url, storage_options=opts)
    assert back.equals(df)
