"""Fixtures for the tests against a real smbd (the project's testbed). tests/pytest.rs starts
the testbed and runs pytest inside its client namespace with these variables set:

SMB3_TEST_HOST, SMB3_TEST_USER, SMB3_TEST_PASSWORD, SMB3_TEST_DOMAIN: the server and account;
SMB3_TEST_SHARE: a writable share; SMB3_TEST_SHARE_DIR: the directory behind it (this process
runs on the same machine, so it can check what arrived byte for byte).
"""

import os
import uuid

import pytest

import smb3


def _env(name):
    value = os.environ.get(name)
    if value is None:
        pytest.fail(f"{name} is not set: run these tests through tests/pytest.rs")
    return value


@pytest.fixture(scope="session")
def server():
    return {
        "host": _env("SMB3_TEST_HOST"),
        "username": _env("SMB3_TEST_USER"),
        "password": _env("SMB3_TEST_PASSWORD"),
        "domain": _env("SMB3_TEST_DOMAIN"),
        "share": _env("SMB3_TEST_SHARE"),
        "share_dir": _env("SMB3_TEST_SHARE_DIR"),
    }


@pytest.fixture(scope="session")
def client(server):
    c = smb3.Client(
        server["host"],
        username=server["username"],
        password=server["password"],
        domain=server["domain"],
    )
    yield c
    c.logoff()


@pytest.fixture(scope="session")
def share(client, server):
    return client.share(server["share"])


@pytest.fixture
def rdir(share, server):
    """A fresh directory on the share for one test (share-relative), and its local path."""
    name = "t-" + uuid.uuid4().hex[:10]
    share.mkdir(name)
    return name, os.path.join(server["share_dir"], name)


def pattern(n, seed=1):
    """n bytes that differ at every offset (so a misplaced chunk shows)."""
    import random

    return random.Random(seed).randbytes(n)
