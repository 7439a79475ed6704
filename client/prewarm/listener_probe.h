#ifndef DDP_CLIENT_PREWARM_LISTENER_PROBE_H_
#define DDP_CLIENT_PREWARM_LISTENER_PROBE_H_

// Waits until something accepts TCP connections at HOST:PORT.
//
// Why --prewarm needs it: a warm worker reaches init_process_group within
// milliseconds of its start, and PyTorch's TCPStore client, refused because
// rank 0 has not bound MASTER_PORT yet, sleeps a whole second before it tries
// again (torch 1.13: "The server socket ... is not yet listening, will
// retry"). Handing over the other ranks once rank 0's store listens costs
// them milliseconds instead. (Cold workers spend a second importing torch
// first, so the race rarely shows there.)
//
// Each try is a non-blocking connect bounded by the time left, closed at once
// when it succeeds (the store sees a client that connects and leaves).
//
// Thread-safety: a pure function of its arguments (blocks the caller).

#include <string>

#include "absl/time/time.h"

namespace ddp::client {

// True once a connect to host:port succeeded within `timeout`; false when the
// timeout passed (or the host does not resolve).
bool AwaitListener(const std::string& host, int port, absl::Duration timeout);

}  // namespace ddp::client

#endif  // DDP_CLIENT_PREWARM_LISTENER_PROBE_H_
