"""The torchrun handler's parameters: endpoints, required values, --rdzv-conf checks and
its registration (no coordinator needed)."""
import pytest

pytest.importorskip("torch")

from torch.distributed.elastic.rendezvous import RendezvousParameters  # noqa: E402
from torch.distributed.elastic.rendezvous import registry  # noqa: E402

from ddp_coordinator import torchrun  # noqa: E402


def params(endpoint="127.0.0.1:29400", run_id="job", **conf):
    conf.setdefault("nproc_per_node", 2)
    return RendezvousParameters("ddp", endpoint, run_id, 1, 2, **conf)


def test_endpoints_DefaultPortAndLists():
    assert torchrun._endpoints("head") == ["head:29400"]
    assert torchrun._endpoints("a:1, b:2") == ["a:1", "b:2"]


@pytest.mark.parametrize("endpoint", ["", "head:0", "head:http", ":29400"])
def test_endpoints_Invalid_NamesTheValue(endpoint):
    with pytest.raises(ValueError, match="rdzv-endpoint"):
        torchrun._endpoints(endpoint)


def test_handler_NoRunId_IsAnError():
    with pytest.raises(ValueError, match="--rdzv-id"):
        torchrun.create_handler(params(run_id=""))


@pytest.mark.parametrize("conf, match", [({"join_timeout": "soon"}, "join_timeout"),
                                         ({"timeout": "-5"}, "timeout"),
                                         ({"nproc_per_node": "x"}, "nproc_per_node"),
                                         ({"max_restarts": "-1"}, "max_restarts")])
def test_handler_BadConf_NamesTheKey(conf, match):
    with pytest.raises(ValueError, match=match):
        torchrun.create_handler(params(**conf))


def test_handler_Conf_SetsTheJobSettings():
    handler = torchrun.create_handler(params(node_id="n7", local_addr="10.0.0.7",
                                             join_timeout="90s", max_restarts=4))
    assert handler.get_backend() == "ddp" and handler.get_run_id() == "job"
    settings = handler._register.settings
    assert (settings.min_nodes, settings.max_nodes, settings.nproc_per_node) == (1, 2, 2)
    assert settings.max_restarts == 4 and settings.join_timeout_ms == 90000
    assert handler._register.node_id == "n7" and handler._register.address == "10.0.0.7"
    assert handler.num_nodes_waiting() == 0 and not handler.is_closed()


def test_register_MakesTheBackendKnownToTorchrun():
    torchrun.register()
    torchrun.register()  # twice is harmless
    handler = registry.get_rendezvous_handler(params())
    assert isinstance(handler, torchrun.CoordinatorRendezvousHandler)
    assert torchrun.handler_creator() is torchrun.create_handler
