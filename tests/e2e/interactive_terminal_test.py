#!/usr/bin/python3
"""ddp-client in the foreground of a terminal (a pty, as a shell gives it): its
local workers read the terminal (input(), as pdb does) and the terminal's Ctrl-C
reaches them; the agent then stops as torchrun does on Ctrl-C (exit 130), without
counting a failure or restarting. With one local worker, and with two where local
rank 1 (not 0) reads: under torchrun every worker is in the terminal's foreground
group. Uses the standard library's python3 (no torch)."""
import os
import pty
import select
import signal
import sys
import tempfile
import time


def runfile(path):
    return os.path.join(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"], path)


WORKER = r'''
import sys, time
line = input("ready> ")
print("worker got: " + line[::-1], flush=True)
print("waiting for Ctrl-C", flush=True)
time.sleep(120)
print("never interrupted", flush=True)
'''


# Two local workers: rank 1 asks, rank 0 only waits (neither reads before
# the other: each typed line goes to whichever reads first, as under torchrun).
TWO_WORKERS = r'''
import os, sys, time
rank = os.environ["LOCAL_RANK"]
try:
    if rank == "1":
        line = input("ready1> ")
        print("worker 1 got: " + line[::-1], flush=True)
    else:
        time.sleep(1)
    print("worker %s waiting for Ctrl-C" % rank, flush=True)
    time.sleep(120)
    print("never interrupted", flush=True)
except KeyboardInterrupt:
    print("worker %s interrupted" % rank, flush=True)
    sys.exit(130)
'''


class Terminal:
    def __init__(self, argv, env, cwd):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: session leader, the pty its controlling terminal
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        self.output = b""
        self.status = None

    def read_until(self, needle, timeout):
        deadline = time.time() + timeout
        while needle.encode() not in self.output:
            left = deadline - time.time()
            if left <= 0:
                raise AssertionError("no %r within %.0f s; terminal so far:\n%s" %
                                     (needle, timeout, self.output.decode(errors="replace")))
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.5))
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # EIO: the other side closed
                    chunk = b""
                if not chunk and self.exited(0):
                    continue
                self.output += chunk

    def drain(self):
        """Reads what the terminal still holds (after the agent exited)."""
        while True:
            ready, _, _ = select.select([self.fd], [], [], 1)
            if not ready:
                return
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:  # EIO: nothing left, the other side closed
                return
            if not chunk:
                return
            self.output += chunk

    def write(self, data):
        os.write(self.fd, data)

    def exited(self, timeout):
        if self.status is not None:
            return True
        deadline = time.time() + timeout
        while True:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                self.status = status
                return True
            if time.time() >= deadline:
                return False
            time.sleep(0.05)


def run(work, script, nproc, talk):
    """Runs ddp-client on a pty with `nproc` local workers of `script`; `talk`
    drives the terminal up to the Ctrl-C. Returns the terminal's text after
    checking that the agent exited 130."""
    env = dict(os.environ)
    env["PYTHON_EXEC"] = "/usr/bin/python3"
    env["PATH"] = os.path.dirname(runfile("coordinator/coordinator")) + ":" + env.get("PATH", "")
    argv = [runfile("client/agent/ddp-client"), "--standalone", "--nproc_per_node=%d" % nproc,
            "--log-dir", os.path.join(work, "logs-%d" % nproc), script]
    term = Terminal(argv, env, work)
    try:
        talk(term)
        term.write(b"\x03")  # Ctrl-C: the line discipline sends SIGINT to the foreground group
        if not term.exited(60):
            raise AssertionError("ddp-client still runs 60 s after Ctrl-C; terminal:\n" +
                                 term.output.decode(errors="replace"))
        code = os.waitstatus_to_exitcode(term.status)
        term.drain()
        text = term.output.decode(errors="replace")
        assert code == 130, "ddp-client exited %d after Ctrl-C (torchrun: 130); terminal:\n%s" % (code, text)
        assert "never interrupted" not in text, text
        assert "restart" not in text.lower() or "restart 0" in text.lower(), text
        return text
    finally:
        if not term.exited(0):
            os.kill(term.pid, signal.SIGKILL)
            term.exited(5)


def one_worker(term):
    term.read_until("ready> ", 90)
    term.write(b"hello terminal\n")
    term.read_until("worker got: lanimret olleh", 30)
    term.read_until("waiting for Ctrl-C", 30)


def two_workers(term):
    term.read_until("ready1> ", 90)
    term.write(b"hello rank one\n")
    term.read_until("worker 1 got: eno knar olleh", 30)
    term.read_until("worker 0 waiting for Ctrl-C", 30)
    term.read_until("worker 1 waiting for Ctrl-C", 30)


def main():
    work = tempfile.mkdtemp(prefix="ddp-interactive.")
    with open(os.path.join(work, "ask.py"), "w") as f:
        f.write(WORKER)
    with open(os.path.join(work, "ask_two.py"), "w") as f:
        f.write(TWO_WORKERS)
    run(work, "ask.py", 1, one_worker)
    print("one worker: input() read the typed line, Ctrl-C stopped the run with 130")
    text = run(work, "ask_two.py", 2, two_workers)
    for rank in ("0", "1"):
        assert "worker %s interrupted" % rank in text, text
    print("two workers: local rank 1 read the typed line, Ctrl-C stopped both and the run with 130")


if __name__ == "__main__":
    main()
