// Job requests from the network as arbitrary bytes: a CreateJobRequest and an
// AgentMessage (the first input byte says where one ends), through the
// conversion and validation of the JobService and SessionService adapters into
// a JobRegistry (in memory, fake clock). Invariants:
//   - a created job reads back with exactly the settings converted from the
//     request, and they pass validation;
//   - a Register the registry accepts shows its node in GetJob;
//   - refused requests change nothing.

#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/clock.h"
#include "coordinator/rendezvous/job_registry.h"
#include "coordinator/session/job_proto_convert.h"
#include "proto/ddp/v1/jobs.pb.h"
#include "proto/ddp/v1/session.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ddp;  // NOLINT: a test
  if (size == 0) return 0;
  const size_t split = std::min<size_t>(size - 1, data[0] * 4);
  v1::CreateJobRequest create;
  v1::AgentMessage agent;
  if (!create.ParseFromArray(data + 1, static_cast<int>(split))) return 0;
  if (!agent.ParseFromArray(data + 1 + split, static_cast<int>(size - 1 - split))) return 0;
  static FakeClock clock;
  rendezvous::JobRegistryOptions options;
  options.max_jobs = 4;
  rendezvous::JobRegistry registry(clock, nullptr, options);
  const rendezvous::RendezvousLimits& limits = options.limits;

  const rendezvous::JobSettings settings = rendezvous::RequestedSettings(create.settings());
  absl::StatusOr<v1::Job> created = registry.CreateJob(create.job_id(), settings);
  absl::StatusOr<v1::Job> got = registry.GetJob(create.job_id(), false);
  if (created.ok()) {
    if (!got.ok() || got->settings().SerializeAsString() != settings.SerializeAsString()) std::abort();
    if (!rendezvous::ValidateJobSettings(got->settings(), limits).ok()) std::abort();
  } else if (got.ok()) {
    std::abort();  // refused, yet created
  }
  if (!agent.has_register_()) return 0;
  absl::StatusOr<rendezvous::RegisterRequest> request =
      session::RegisterFromProto(agent.register_(), limits);
  if (!request.ok()) return 0;
  const bool existed = registry.GetJob(request->job_id, false).ok();
  absl::StatusOr<rendezvous::RegisterResult> registered = registry.Register(*request);
  absl::StatusOr<v1::Job> job = registry.GetJob(request->job_id, true);
  if (registered.ok()) {
    if (!job.ok()) std::abort();
    bool listed = false;
    for (const auto* nodes : {&job->members(), &job->spares()}) {
      for (const v1::Member& node : *nodes) {
        listed = listed || (node.node_id() == request->node_id &&
                            node.incarnation() == request->incarnation);
      }
    }
    if (!listed) std::abort();
  } else if (!existed && job.ok()) {
    std::abort();  // a refused first registration left a job behind
  }
  return 0;
}
