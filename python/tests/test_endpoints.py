"""parse_endpoints: the --coordinator forms ddpctl and ddp-client take (common/endpoint.h)."""
import pytest

from ddp_coordinator._connection import parse_endpoints


def test_parse_endpoints_HostPortSchemesAndLists_OneForm():
    assert parse_endpoints("head, b:1,[::1],[::1]:7,grpc://c,http://d:5/") == [
        "head:29400", "b:1", "[::1]:29400", "[::1]:7", "c:29400", "d:5"]
    assert parse_endpoints(["a", "b:2"]) == ["a:29400", "b:2"]


def test_parse_endpoints_OtherSchemeOrEmpty_Refused():
    with pytest.raises(ValueError, match="https://b"):
        parse_endpoints("a,https://b:1")
    with pytest.raises(ValueError):
        parse_endpoints("a,")
