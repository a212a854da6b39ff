"""Files as io objects, listings, path operations, copies and errors against smbd."""

import csv
import hashlib
import io
import os
import shutil
import tarfile
import threading
import zipfile

import pytest

import smb3
from conftest import pattern

MIB = 1 << 20


def test_copyfileobj_round_trip_is_byte_exact(share, rdir, tmp_path):
    d, local_dir = rdir
    data = pattern(9 * MIB + 12345, seed=7)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    # Up: a local file into the share through the buffered writer.
    with open(src, "rb") as fsrc, share.open(f"{d}/up.bin", "wb") as fdst:
        assert isinstance(fdst, io.BufferedWriter)
        shutil.copyfileobj(fsrc, fdst, 4 * MIB)
    with open(os.path.join(local_dir, "up.bin"), "rb") as f:
        assert hashlib.sha256(f.read()).digest() == hashlib.sha256(data).digest()
    # Down: back through the buffered reader, in odd-sized pieces too.
    out = tmp_path / "down.bin"
    with share.open(f"{d}/up.bin", "rb") as fsrc, open(out, "wb") as fdst:
        assert isinstance(fsrc, io.BufferedReader)
        assert isinstance(fsrc.raw, io.RawIOBase)
        shutil.copyfileobj(fsrc, fdst, 4 * MIB)
    assert out.read_bytes() == data
    with share.open(f"{d}/up.bin", "rb") as f:
        parts = []
        while True:
            b = f.read(777_777)
            if not b:
                break
            parts.append(b)
    assert b"".join(parts) == data


def test_read_bytes_and_write_bytes_whole_files(share, rdir):
    d, local_dir = rdir
    small = pattern(4096, seed=11)
    large = pattern(2 * MIB + 1, seed=12)
    # New files: a small one in one round trip, a large one through an open.
    assert share.write_bytes(f"{d}/small.bin", small) == len(small)
    assert share.write_bytes(f"{d}/large.bin", bytearray(large)) == len(large)
    assert share.write_bytes(f"{d}/empty.bin", b"") == 0
    with open(os.path.join(local_dir, "large.bin"), "rb") as f:
        assert f.read() == large
    assert share.read_bytes(f"{d}/small.bin") == small
    assert share.read_bytes(f"{d}/large.bin") == large
    assert share.read_bytes(f"{d}/empty.bin") == b""
    # An existing file is replaced whole, shorter or longer.
    share.write_bytes(f"{d}/large.bin", b"short")
    assert share.read_bytes(f"{d}/large.bin") == b"short"
    share.write_bytes(f"{d}/small.bin", large)
    assert share.read_bytes(f"{d}/small.bin") == large
    with pytest.raises(FileNotFoundError):
        share.read_bytes(f"{d}/missing.bin")
    with pytest.raises(FileNotFoundError):
        share.write_bytes(f"{d}/no/such/dir.bin", small)


def test_raw_file_is_a_real_raw_io(share, rdir):
    d, _ = rdir
    with share.open(f"{d}/raw.bin", "w+b", buffering=0) as f:
        assert isinstance(f, io.RawIOBase)
        assert f.readable() and f.writable() and f.seekable()
        assert f.write(b"hello world") == 11
        f.seek(0)
        buf = bytearray(5)
        assert f.readinto(buf) == 5 and buf == b"hello"
        assert f.readall() == b" world"
        assert f.read(10) == b""
    assert f.closed
    with pytest.raises(ValueError):
        f.read(1)


def test_seek_tell_truncate(share, rdir):
    d, local_dir = rdir
    with share.open(f"{d}/s.bin", "w+b") as f:
        f.write(b"0123456789")
        assert f.tell() == 10
        assert f.seek(-3, io.SEEK_END) == 7
        assert f.read() == b"789"
        assert f.seek(2) == 2
        assert f.read(3) == b"234"
        assert f.seek(2, io.SEEK_CUR) == 7
        assert f.truncate(4) == 4
        f.seek(0)
        assert f.read() == b"0123"
        # Writing past the end extends with zeros.
        f.seek(6)
        f.write(b"X")
        f.flush()
        f.seek(0)
        assert f.read() == b"0123\0\0X"
    with open(os.path.join(local_dir, "s.bin"), "rb") as f:
        assert f.read() == b"0123\0\0X"
    with share.open(f"{d}/s.bin", "ab") as f:
        f.write(b"!")
    assert share.stat(f"{d}/s.bin").st_size == 8
    with share.open(f"{d}/s.bin", "rb") as f:
        with pytest.raises(io.UnsupportedOperation):
            f.write(b"x")


def test_text_mode_and_csv(share, rdir):
    d, _ = rdir
    rows = [["id", "name", "city"]] + [[str(i), f"n{i}", "Zürich"] for i in range(1000)]
    with share.open(f"{d}/t.csv", "w", newline="") as f:
        assert isinstance(f, io.TextIOWrapper)
        csv.writer(f).writerows(rows)
    with share.open(f"{d}/t.csv", "r", newline="") as f:
        assert list(csv.reader(f)) == rows


def test_zipfile_written_to_and_read_from_the_share(share, rdir):
    d, _ = rdir
    members = {f"dir/m{i}.bin": pattern(1000 * i + 1, seed=i) for i in range(20)}
    with share.open(f"{d}/a.zip", "wb") as f:
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for name, data in members.items():
                z.writestr(name, data)
    with share.open(f"{d}/a.zip", "rb") as f:
        with zipfile.ZipFile(f) as z:
            assert z.testzip() is None
            assert sorted(z.namelist()) == sorted(members)
            for name, data in members.items():
                assert z.read(name) == data


def test_tarfile_on_the_share(share, rdir, tmp_path):
    d, _ = rdir
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "b.bin").write_bytes(pattern(300_000, seed=3))
    with share.open(f"{d}/x.tar.gz", "wb") as f:
        with tarfile.open(fileobj=f, mode="w:gz") as t:
            t.add(tmp_path / "a.txt", arcname="a.txt")
            t.add(tmp_path / "b.bin", arcname="b.bin")
    with share.open(f"{d}/x.tar.gz", "rb") as f:
        with tarfile.open(fileobj=f, mode="r:gz") as t:
            assert t.extractfile("a.txt").read() == b"alpha"
            assert t.extractfile("b.bin").read() == (tmp_path / "b.bin").read_bytes()


def test_listing_stat_and_walk(share, rdir):
    d, _ = rdir
    share.makedirs(f"{d}/a/b/c")
    share.makedirs(f"{d}/a/b/c")  # exist_ok by default
    with pytest.raises(smb3.FileExists):
        share.makedirs(f"{d}/a/b", exist_ok=False)
    for p, n in [("a/one", 1), ("a/b/two", 2), ("a/b/c/three", 3), ("top", 4)]:
        with share.open(f"{d}/{p}", "wb") as f:
            f.write(b"x" * n)
    assert sorted(share.listdir(d)) == ["a", "top"]
    with share.scandir(f"{d}/a") as it:
        entries = {e.name: e for e in it}
    assert set(entries) == {"one", "b"}
    assert entries["b"].is_dir() and not entries["b"].is_file()
    assert entries["one"].is_file() and entries["one"].stat().st_size == 1
    assert entries["one"].path == f"{d}/a/one"
    st = share.stat(f"{d}/a/b/two")
    assert st.st_size == 2 and st.is_file() and st.st_mtime > 1e9
    assert share.stat(d).is_dir()
    assert share.exists(f"{d}/top") and not share.exists(f"{d}/nope")
    assert share.isdir(f"{d}/a") and not share.isdir(f"{d}/top")
    assert share.isfile(f"{d}/top") and not share.isfile(f"{d}/nope")
    walked = {dp: (sorted(dn), sorted(fn)) for dp, dn, fn in share.walk(d)}
    assert walked == {
        d: (["a"], ["top"]),
        f"{d}/a": (["b"], ["one"]),
        f"{d}/a/b": (["c"], ["two"]),
        f"{d}/a/b/c": ([], ["three"]),
    }
    # Pruning in place, as os.walk allows.
    seen = []
    for dp, dn, fn in share.walk(d):
        seen.append(dp)
        dn[:] = [x for x in dn if x != "b"]
    assert f"{d}/a/b" not in seen
    bottom_up = [dp for dp, _, _ in share.walk(d, topdown=False)]
    assert bottom_up[-1] == d and bottom_up[0] == f"{d}/a/b/c"
    flat = sorted(e.path for e in share.walk_entries(d))
    assert flat == sorted(
        f"{d}/{p}" for p in ["a", "a/one", "a/b", "a/b/two", "a/b/c", "a/b/c/three", "top"]
    )


def test_rename_remove_rmdir(share, rdir):
    d, local_dir = rdir
    with share.open(f"{d}/f1", "wb") as f:
        f.write(b"1")
    with share.open(f"{d}/f2", "wb") as f:
        f.write(b"2")
    with pytest.raises(FileExistsError):
        share.rename(f"{d}/f1", f"{d}/f2")
    share.rename(f"{d}/f1", f"{d}/f2", replace=True)
    with share.open(f"{d}/f2", "rb") as f:
        assert f.read() == b"1"
    share.mkdir(f"{d}/sub")
    share.rename(f"{d}/f2", f"{d}/sub/f3")
    with pytest.raises(smb3.DirectoryNotEmpty):
        share.rmdir(f"{d}/sub")
    share.remove(f"{d}/sub/f3")
    share.rmdir(f"{d}/sub")
    assert os.listdir(local_dir) == []


def test_download_upload_and_trees_with_the_library_copy(share, rdir, tmp_path):
    d, local_dir = rdir
    data = pattern(5 * MIB + 3, seed=11)
    src = tmp_path / "big.bin"
    src.write_bytes(data)
    assert share.upload(str(src), f"{d}/big.bin") == len(data)
    with open(os.path.join(local_dir, "big.bin"), "rb") as f:
        assert f.read() == data
    out = tmp_path / "back.bin"
    assert share.download(f"{d}/big.bin", out) == len(data)
    assert out.read_bytes() == data
    # Refusing to overwrite.
    with pytest.raises(FileExistsError):
        share.download(f"{d}/big.bin", out, overwrite=False)
    # Trees both ways.
    tree = tmp_path / "tree"
    (tree / "x" / "y").mkdir(parents=True)
    (tree / "empty").mkdir()
    files = {"a.bin": 70_000, "x/b.bin": 1, "x/y/c.bin": 2 * MIB + 1, "zero": 0}
    for rel, n in files.items():
        (tree / rel).write_bytes(pattern(n, seed=n))
    nfiles, nbytes = share.upload_tree(tree, f"{d}/tree")
    assert (nfiles, nbytes) == (len(files), sum(files.values()))
    back = tmp_path / "back"
    assert share.download_tree(f"{d}/tree", back) == (nfiles, nbytes)
    for rel, n in files.items():
        assert (back / rel).read_bytes() == pattern(n, seed=n), rel
    assert (back / "empty").is_dir()
    # Server-side copy.
    assert share.copy(f"{d}/big.bin", f"{d}/copy.bin") == len(data)
    with open(os.path.join(local_dir, "copy.bin"), "rb") as f:
        assert f.read() == data


def test_not_found_is_a_file_not_found_error_with_the_ntstatus(share):
    with pytest.raises(smb3.NotFoundError) as e:
        share.open("no/such/dir/file.txt", "rb")
    assert isinstance(e.value, FileNotFoundError)
    assert isinstance(e.value, smb3.SMBError)
    assert e.value.errno == 2
    assert e.value.ntstatus in (0xC0000034, 0xC000003A)
    assert e.value.status_name.startswith("STATUS_OBJECT_")
    with pytest.raises(FileNotFoundError) as e:
        share.stat("nope.txt")
    assert e.value.ntstatus == 0xC0000034
    with pytest.raises(smb3.NotFound):
        share.remove("nope.txt")


def test_wrong_password_is_an_auth_error(server):
    with pytest.raises(smb3.AuthError) as e:
        smb3.Client(
            server["host"],
            username=server["username"],
            password="not-" + server["password"],
            domain=server["domain"],
        )
    assert e.value.ntstatus == 0xC000006D
    assert e.value.status_name == "STATUS_LOGON_FAILURE"
    assert isinstance(e.value, PermissionError)


def test_missing_share_and_unreachable_server(client, server):
    with pytest.raises(smb3.NotFoundError) as e:
        client.share("no-such-share")
    assert e.value.ntstatus == 0xC00000CC  # STATUS_BAD_NETWORK_NAME
    with pytest.raises(smb3.SMBConnectionError) as e:
        smb3.Client(server["host"], username="x", password="y", port=1, connect_timeout=5)
    assert isinstance(e.value, ConnectionError)


def test_permission_denied(share, rdir, server):
    d, local_dir = rdir
    # A read-only file (DOS attribute) cannot be opened for writing.
    with share.open(f"{d}/ro", "wb") as f:
        f.write(b"x")
    os.chmod(os.path.join(local_dir, "ro"), 0o444)
    # smbd maps a file without write bits to FILE_ATTRIBUTE_READONLY.
    with pytest.raises(smb3.PermissionDenied) as e:
        share.open(f"{d}/ro", "r+b")
    assert isinstance(e.value, PermissionError)
    assert e.value.ntstatus == 0xC0000022


def test_invalid_arguments(share):
    with pytest.raises(ValueError):
        share.open("x", "rw")
    with pytest.raises(smb3.InvalidArgument):
        smb3.Client("h", password="p")


def test_threads_share_one_client(share, rdir):
    d, _ = rdir
    errors = []

    def worker(i):
        try:
            data = pattern(300_000 + i, seed=i)
            with share.open(f"{d}/th{i}", "wb") as f:
                f.write(data)
            with share.open(f"{d}/th{i}", "rb") as f:
                assert f.read() == data
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors


def test_connect_by_url(server):
    url = f"smb://{server['domain']};{server['username']}@{server['host']}/{server['share']}"
    s = smb3.connect(url, server["password"])
    assert s.name == server["share"]
    assert isinstance(s.listdir(""), list)
    assert smb3.parse_url(url)["username"] == server["username"]


def test_ctrl_c_interrupts_a_long_copy_and_leaves_nothing(share, rdir, tmp_path):
    import _thread
    import time

    d, local_dir = rdir
    size = 256 * MIB
    with open(os.path.join(local_dir, "huge.bin"), "wb") as f:
        f.truncate(size)
    out = tmp_path / "huge.bin"
    timer = threading.Timer(0.05, _thread.interrupt_main)
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        share.download(f"{d}/huge.bin", out)
        # Finished before the timer fired (a very fast machine): wait for the interrupt.
        time.sleep(5)
    timer.join()
    assert time.monotonic() - started < 5
    # The partial local file is gone and the session still works.
    assert not out.exists()
    with share.open(f"{d}/huge.bin", "rb") as f:
        f.seek(size - 3)
        assert f.read() == b"\0\0\0"


def test_read_ahead_follows_seeks_and_own_writes(share, rdir):
    d, _ = rdir
    data = bytearray(pattern(6 * MIB + 100, seed=21))
    with share.open(f"{d}/ra.bin", "wb") as f:
        f.write(data)
    with share.open(f"{d}/ra.bin", "r+b", buffering=0) as f:
        got = bytearray()
        while len(got) < 2 * MIB:  # in order: the read-ahead starts
            got += f.read(256 * 1024)
        assert got == data[: len(got)]
        # Overwrite what was read ahead, through this handle: the reads see the new bytes.
        f.write_at(3 * MIB, b"NEW" * 1000)
        data[3 * MIB : 3 * MIB + 3000] = b"NEW" * 1000
        while True:
            b = f.read(300_000)
            if not b:
                break
            got += b
        assert got == data
        # A seek back and forth.
        f.seek(5 * MIB)
        assert f.read(10) == data[5 * MIB : 5 * MIB + 10]
        f.seek(17)
        assert f.read(1 * MIB) == data[17 : 17 + MIB]
        assert f.read(1 * MIB) == data[17 + MIB : 17 + 2 * MIB]
        f.truncate(100)
        f.seek(0)
        assert f.read() == data[:100]


def test_writes_sent_behind_are_on_the_server_after_flush(share, rdir):
    d, local_dir = rdir
    data = pattern(5 * MIB + 7, seed=31)
    f = share.open(f"{d}/wb.bin", "wb", buffering=0)
    for i in range(0, len(data), 256 * 1024):
        assert f.write(data[i : i + 256 * 1024]) == min(256 * 1024, len(data) - i)
    f.flush()
    with open(os.path.join(local_dir, "wb.bin"), "rb") as g:
        assert g.read() == data
    # A seek back waits for them too, so a rewrite lands after the first write.
    f.seek(10)
    f.write(b"REWRITE")
    f.close()
    data = data[:10] + b"REWRITE" + data[17:]
    with open(os.path.join(local_dir, "wb.bin"), "rb") as g:
        assert g.read() == data
