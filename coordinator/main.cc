// The coordinator binary (coordinator/coordinator_command.h).

#include "coordinator/coordinator_command.h"

int main(int argc, char** argv) { return ddp::RunCoordinatorCommand(argc, argv); }
