"""Unit tests run without network: sockets other than Unix sockets are disabled."""

import pytest
import pytest_socket


@pytest.fixture(autouse=True)
def _no_network():
    pytest_socket.disable_socket(allow_unix_socket=True)
    yield
    pytest_socket.enable_socket()
