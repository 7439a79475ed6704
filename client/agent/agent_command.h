#ifndef DDP_CLIENT_AGENT_AGENT_COMMAND_H_
#define DDP_CLIENT_AGENT_AGENT_COMMAND_H_

// ddp-client's node agent, from the command line to the exit code: torchrun's
// and torch.distributed.launch's flags (`ddp-client --help`), the session
// with the coordinator, the workers. Returns 0 success, 1 job failed / node
// dismissed, 2 usage or coordinator errors or an entry point that cannot
// start, 128+N signal N.
//
// Thread-safety: call once per process, from its main thread, before any
// other thread exists (it blocks SIGINT/SIGTERM/SIGHUP for every thread).

namespace ddp::client {

int RunAgentCommand(int argc, char** argv);

}  // namespace ddp::client

#endif  // DDP_CLIENT_AGENT_AGENT_COMMAND_H_
