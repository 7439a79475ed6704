// The ddp-client binary: the node agent (client/agent/agent_command.h), or,
// with --serve-coordinator as its first argument, the coordinator
// (coordinator/coordinator_command.h; the flags that follow are the
// coordinator's). The agent runs the second form as its child to serve the
// coordinator of --standalone, the c10d form and the static form
// (client/agent/standalone_coordinator.h), so a ddp-client copied alone to a
// node needs no other binary.

#include <string>
#include <vector>

#include "client/agent/agent_command.h"
#include "client/agent/standalone_coordinator.h"
#include "coordinator/coordinator_command.h"

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == ddp::client::kServeCoordinatorArg) {
    // argv[0], then the coordinator's flags.
    std::vector<char*> coordinator_args = {argv[0]};
    coordinator_args.insert(coordinator_args.end(), argv + 2, argv + argc);
    coordinator_args.push_back(nullptr);
    return ddp::RunCoordinatorCommand(argc - 1, coordinator_args.data());
  }
  return ddp::client::RunAgentCommand(argc, argv);
}
