#ifndef DDP_CLIENT_GLOO_CHECK_SOURCE_H_
#define DDP_CLIENT_GLOO_CHECK_SOURCE_H_

// client/gloo_check.py, embedded (genrule gloo_check_source_gen): the program
// of --health-check builtin=gloo, which the agent runs as PYTHON -c SOURCE N.

namespace ddp::client {

const char* GlooCheckSource();

}  // namespace ddp::client

#endif  // DDP_CLIENT_GLOO_CHECK_SOURCE_H_
