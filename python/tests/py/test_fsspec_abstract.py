"""fsspec's own abstract test suite (fsspec.tests.abstract: copy, get, put, open, pipe) run on
the smb3 filesystem against smbd, in a fresh directory of the share for each test."""

import pytest

abstract = pytest.importorskip("fsspec.tests.abstract")

from smb3.fsspec import SMB3FileSystem  # noqa: E402


class SMB3Fixtures(abstract.AbstractFixtures):
    @pytest.fixture
    def fs(self, server):
        return SMB3FileSystem(
            host=server["host"],
            username=server["username"],
            password=server["password"],
            domain=server["domain"],
        )

    @pytest.fixture
    def fs_path(self, server, rdir):
        return f"/{server['share']}/{rdir[0]}"

    @pytest.fixture
    def supports_empty_directories(self):
        return True


class TestSMB3Copy(abstract.AbstractCopyTests, SMB3Fixtures):
    pass


class TestSMB3Get(abstract.AbstractGetTests, SMB3Fixtures):
    pass


class TestSMB3Put(abstract.AbstractPutTests, SMB3Fixtures):
    pass


class TestSMB3Open(abstract.AbstractOpenTests, SMB3Fixtures):
    pass


class TestSMB3Pipe(abstract.AbstractPipeTests, SMB3Fixtures):
    pass
