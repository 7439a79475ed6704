#ifndef DDP_CLIENT_PREWARM_STANDBY_SITE_H_
#define DDP_CLIENT_PREWARM_STANDBY_SITE_H_

// client/prewarm/sitecustomize.py, embedded (genrule standby_site_gen): the
// standby half of --prewarm, written into the agent's run directory.

namespace ddp::client {

const char* StandbySiteSource();

}  // namespace ddp::client

#endif  // DDP_CLIENT_PREWARM_STANDBY_SITE_H_
