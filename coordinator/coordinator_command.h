#ifndef DDP_COORDINATOR_COORDINATOR_COMMAND_H_
#define DDP_COORDINATOR_COORDINATOR_COMMAND_H_

// The coordinator's command line, from the flags to the exit code: what the
// `coordinator` binary runs, and what `ddp-client --serve-coordinator` runs
// so that a ddp-client copied alone to a node serves the coordinator of
// --standalone, the c10d form and the static form from its own executable.
//
// argv[0] names the program; the rest are the coordinator's flags
// (`coordinator --help`). Blocks until SIGINT/SIGTERM (or a fatal error) and
// returns the exit code (common/exit_codes.h: 0 clean shutdown, 1 runtime
// failure, 2 bad flags, 3 data error, 4 address in use, 5 lost the
// leadership).
//
// Thread-safety: call once per process, from its main thread, before any
// other thread exists (it blocks SIGINT/SIGTERM for every thread it starts
// and parses the process-wide absl flags).

namespace ddp {

int RunCoordinatorCommand(int argc, char** argv);

}  // namespace ddp

#endif  // DDP_COORDINATOR_COORDINATOR_COMMAND_H_
