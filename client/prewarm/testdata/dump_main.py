"""What a worker can observe of how it was started, as JSON in argv[1].

    python3 -u dump_main.py OUT [raise] [loaded=M1,M2]   or   python3 -u -m dump_main OUT ...

client/prewarm/standby_pool_test compares the dump of a cold start with the
dump of a --prewarm warm start; they must be equal. With "raise" it ends with
an uncaught exception (its traceback is compared too). With loaded=M1,M2 the dump also says
which of those modules were imported before the script looked.
"""
import json
import multiprocessing
import os
import sys


def describe(value):
    if type(value).__name__ == "ModuleSpec":  # its repr carries the loader's address
        return "ModuleSpec(%r, %r, %s)" % (value.name, value.origin, describe(value.loader))
    if type(value).__name__ == "function":
        return "<function %s>" % value.__qualname__
    loader = getattr(value, "path", None)
    if loader is not None:  # a loader: its repr carries an address
        return "%s(%r, %r)" % (type(value).__name__, getattr(value, "name", None), loader)
    return repr(value)


def child_view(queue):
    queue.put({"RANK": os.environ.get("RANK"), "argv": sys.argv,
               "main_file": getattr(sys.modules["__main__"], "__file__", None)})


def main():
    main_module = sys.modules["__main__"]
    names = sorted(k for k in vars(main_module) if not k.startswith("__") or k in (
        "__name__", "__file__", "__package__", "__spec__", "__loader__", "__cached__",
        "__doc__", "__annotations__", "__builtins__"))
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=child_view, args=(queue,))
    child.start()
    spawned = queue.get(timeout=60)
    child.join()
    dump = {
        "environ": list(os.environ.items()),
        "argv": sys.argv,
        "orig_argv": sys.orig_argv,
        "path": sys.path,
        "cwd": os.getcwd(),
        "main": {name: describe(vars(main_module)[name]) for name in names
                 if name != "__builtins__"},
        "main_names": names,
        "builtins_is_module": type(vars(main_module)["__builtins__"]).__name__,
        "sitecustomize": getattr(sys.modules.get("sitecustomize"), "__file__", None),
        "fds": sorted(os.listdir("/proc/self/fd")),
        "flags": repr(sys.flags),
        "spawned_child": spawned,
        # Every directory with a sitecustomize.py the interpreter looked in.
        "site_dirs_seen": sorted(k for k in sys.path_importer_cache
                                 if os.path.isfile(os.path.join(k, "sitecustomize.py"))),
    }
    # loaded=M1,M2 (asked by a test): which of those modules the script found imported.
    for arg in sys.argv[2:]:
        if arg.startswith("loaded="):
            dump["loaded"] = {name: name in sys.modules for name in arg[7:].split(",")}
    with open(sys.argv[1], "w") as out:
        json.dump(dump, out, indent=1, sort_keys=True)
    if sys.argv[2:] == ["raise"]:
        raise RuntimeError("the script's own error")


if __name__ == "__main__":
    main()
