#include "tools/ddpctl/grpc_commands.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/grpc_tls.h"
#include "ddp/v1/kv.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tools/ddpctl/grpc_command_context.h"
#include "tools/ddpctl/json_output.h"
#include "tools/ddpctl/output.h"

namespace ddp::ddpctl {
namespace {

// Margin given to a Wait call beyond its server-side timeout, so the server's
// DEADLINE_EXCEEDED (with its message) arrives before the client's deadline.
constexpr absl::Duration kWaitDeadlineMargin = absl::Seconds(5);

// A conditional write whose condition did not hold (`kv put --if-absent` or
// `--expect-revision`): as etcdctl's txn, "FAILURE" on stdout and exit 0;
// the coordinator's reason on stderr.
grpc::Status PrintConditionFailed(CommandContext& c, const std::string& reason) {
  if (c.json()) {
    c.out << "{\"succeeded\":false,\"reason\":" << JsonQuote(reason) << "}\n";
  } else {
    c.out << "FAILURE\n";
  }
  c.err << "ddpctl: " << c.invocation.command->group << " " << c.invocation.command->verb
        << ": condition failed: " << reason << "\n";
  return grpc::Status::OK;
}

grpc::Status KvPut(CommandContext& c) {
  v1::PutRequest request;
  request.set_namespace_(c.ns());
  request.set_key(c.arg(0));
  request.set_value(c.arg(1));
  request.set_lease(c.invocation.FlagInt64("lease", 0));
  if (c.invocation.HasFlag("if-absent") && c.invocation.FlagString("if-absent") == "true") {
    request.set_if_absent(true);
  }
  if (c.invocation.HasFlag("expect-revision")) {
    request.set_expected_mod_revision(c.invocation.FlagInt64("expect-revision", 0));
  }
  const bool prev = c.invocation.FlagString("prev") == "true";
  request.set_return_previous(prev);
  const bool conditional = request.if_absent() || request.has_expected_mod_revision();
  v1::PutResponse put;
  grpc::Status status = c.Call(c.stub, &v1::KeyValueService::Stub::Put, request, &put);
  if (conditional && status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
    return PrintConditionFailed(c, status.error_message());
  }
  if (!status.ok()) return status;
  c.Print(put, [prev](std::ostream& out, const v1::PutResponse& response) {
    out << "OK (revision " << response.revision() << ")\n";
    if (prev) {
      out << "previous: "
          << (response.had_previous() ? PrintableBytes(response.previous().value())
                                      : std::string("(none)"))
          << "\n";
    }
  });
  return grpc::Status::OK;
}

grpc::Status KvGet(CommandContext& c) {
  v1::GetRequest request;
  request.set_namespace_(c.ns());
  request.set_key(c.arg(0));
  const int64_t revision = c.invocation.FlagInt64("rev", 0);
  if (revision < 0) {
    return UsageError(absl::InvalidArgumentError(
        absl::StrCat("--rev=", revision, " must be a revision of the store (>= 1; 0: now)")));
  }
  request.set_revision(revision);
  const bool raw = c.invocation.FlagString("print-value-only") == "true";
  return c.CallAndPrint(
      c.stub, &v1::KeyValueService::Stub::Get, request,
      [raw](std::ostream& out, const v1::GetResponse& response) {
        out << (raw ? response.kv().value() : PrintableBytes(response.kv().value())) << "\n";
      });
}

grpc::Status KvList(CommandContext& c) {
  const int64_t limit = c.invocation.FlagInt64("limit", 0);
  if (limit < 0) {
    return UsageError(absl::InvalidArgumentError(absl::StrCat("--limit=", limit, " must be >= 0")));
  }
  const bool keys_only = c.invocation.FlagString("keys-only") == "true";
  v1::RangeRequest request;
  request.set_namespace_(c.ns());
  if (!c.invocation.args.empty()) request.set_prefix(c.arg(0));
  request.set_keys_only(keys_only);
  v1::RangeResponse all;  // --json: every page in one reply
  int64_t printed = 0;
  int64_t revision = 0;
  // Pages until done or --limit keys were printed.
  while (true) {
    if (limit > 0) request.set_limit(limit - printed);
    v1::RangeResponse response;
    grpc::Status status = c.Call(c.stub, &v1::KeyValueService::Stub::Range, request, &response);
    if (!status.ok()) return status;
    if (revision == 0) revision = response.revision();
    for (const v1::KeyValue& kv : response.kvs()) {
      if (c.json()) {
        *all.add_kvs() = kv;
      } else {
        c.out << KeyValueText(kv, !keys_only) << "\n";
      }
      ++printed;
    }
    if (!response.more() || (limit > 0 && printed >= limit) || response.kvs().empty()) {
      break;
    }
    request.set_start_after(response.next_start_after());
  }
  if (c.json()) {
    all.set_revision(revision);
    c.out << CliJson(all) << "\n";
  }
  return grpc::Status::OK;
}

grpc::Status KvDel(CommandContext& c) {
  v1::DeleteRequest request;
  request.set_namespace_(c.ns());
  request.set_key(c.arg(0));
  request.set_prefix(c.invocation.FlagString("prefix") == "true");
  return c.CallAndPrint(c.stub, &v1::KeyValueService::Stub::Delete, request,
                        [](std::ostream& out, const v1::DeleteResponse& response) {
                          out << "deleted " << response.deleted() << " (revision "
                              << response.revision() << ")\n";
                        });
}

grpc::Status KvAdd(CommandContext& c) {
  absl::StatusOr<int64_t> delta = ParseInt64(c.arg(1), "DELTA");
  if (!delta.ok()) return UsageError(delta.status());
  v1::AddRequest request;
  request.set_namespace_(c.ns());
  request.set_key(c.arg(0));
  request.set_delta(*delta);
  return c.CallAndPrint(
      c.stub, &v1::KeyValueService::Stub::Add, request,
      [](std::ostream& out, const v1::AddResponse& response) { out << response.value() << "\n"; });
}

grpc::Status KvCas(CommandContext& c) {
  v1::CompareAndSetRequest request;
  request.set_namespace_(c.ns());
  request.set_key(c.arg(0));
  request.set_expected(c.arg(1));
  request.set_desired(c.arg(2));
  return c.CallAndPrint(c.stub, &v1::KeyValueService::Stub::CompareAndSet, request,
                        [](std::ostream& out, const v1::CompareAndSetResponse& response) {
                          out << (response.swapped() ? "SUCCESS\n" : "FAILURE\n")
                              << PrintableBytes(response.value()) << "\n";
                        });
}

grpc::Status KvWait(CommandContext& c) {
  v1::WaitRequest request;
  request.set_namespace_(c.ns());
  for (const std::string& key : c.invocation.args) request.add_keys(key);
  request.set_timeout_ms(absl::ToInt64Milliseconds(c.invocation.global.timeout));
  const size_t keys = c.invocation.args.size();
  return c.CallAndPrint(
      c.stub, &v1::KeyValueService::Stub::Wait, request,
      [keys](std::ostream& out, const v1::WaitResponse& response) {
        out << "all " << keys << " keys exist (revision " << response.revision() << ")\n";
      },
      kWaitDeadlineMargin);
}

grpc::Status KvWatch(CommandContext& c) {
  v1::WatchRequest request;
  request.set_namespace_(c.ns());
  // The wire watches a prefix; without --prefix only KEY's own events print
  // (etcdctl's habit: `watch lr` does not stream `lr2`).
  const bool prefix = c.invocation.FlagString("prefix") == "true";
  if (c.invocation.args.empty() && !prefix) {
    return UsageError(absl::InvalidArgumentError(
        "kv watch needs KEY, or --prefix (with an optional PREFIX; none: the whole namespace)"));
  }
  const std::string key = c.invocation.args.empty() ? std::string() : c.arg(0);
  request.set_prefix(key);
  const int64_t from = c.invocation.FlagInt64("from-revision", 0);
  if (from < 0) {
    return UsageError(
        absl::InvalidArgumentError(absl::StrCat("--from-revision=", from, " must be >= 0")));
  }
  request.set_start_revision(from);
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::WatchResponse>> reader = c.stub.Watch(&context, request);
  grpc::Status status;
  {
    CancelOnStop cancel_on_stop(context, c.stop);
    v1::WatchResponse response;
    while (reader->Read(&response)) {
      for (const v1::Event& event : response.events()) {
        if (!prefix && event.kv().key() != key) continue;
        c.out << (c.json() ? CliJson(event) : EventText(event)) << "\n";
      }
      c.out.flush();
    }
    status = reader->Finish();
  }
  if (c.stop.HasBeenNotified()) return grpc::Status::OK;
  return status;
}

grpc::Status LeaseGrant(CommandContext& c) {
  absl::StatusOr<absl::Duration> ttl = ParsePositiveDuration(c.arg(0), "TTL");
  if (!ttl.ok()) return UsageError(ttl.status());
  v1::LeaseGrantRequest request;
  request.set_ttl_ms(absl::ToInt64Milliseconds(*ttl));
  // Without --namespace the lease belongs to the token's job (none for the
  // admin token).
  if (c.invocation.global.name_space_given) request.set_namespace_(c.ns());
  return c.CallAndPrint(c.stub, &v1::KeyValueService::Stub::LeaseGrant, request,
                        [](std::ostream& out, const v1::LeaseGrantResponse& response) {
                          // The id alone, for LEASE=$(ddpctl lease grant 10s).
                          out << response.lease() << "\n";
                        });
}

grpc::Status LeaseKeepAlive(CommandContext& c) {
  absl::StatusOr<int64_t> lease = ParseInt64(c.arg(0), "ID");
  if (!lease.ok()) return UsageError(lease.status());
  const bool once = c.invocation.FlagString("once") == "true";
  v1::LeaseKeepAliveRequest request;
  request.set_lease(*lease);
  while (true) {
    v1::LeaseKeepAliveResponse response;
    grpc::Status status =
        c.Call(c.stub, &v1::KeyValueService::Stub::LeaseKeepAlive, request, &response);
    if (!status.ok()) return status;
    c.Print(response, [](std::ostream& out, const v1::LeaseKeepAliveResponse& renewed) {
      out << "lease " << renewed.lease() << " renewed, ttl "
          << absl::FormatDuration(absl::Milliseconds(renewed.ttl_ms())) << "\n";
    });
    c.out.flush();
    if (once) return grpc::Status::OK;
    const absl::Duration period =
        std::max(absl::Milliseconds(response.ttl_ms()) / 3, absl::Milliseconds(1));
    if (c.stop.WaitForNotificationWithTimeout(period)) return grpc::Status::OK;
  }
}

grpc::Status LeaseList(CommandContext& c) {
  return c.CallAndPrint(c.stub, &v1::KeyValueService::Stub::LeaseList, v1::LeaseListRequest(),
                        [](std::ostream& out, const v1::LeaseListResponse& response) {
                          for (int64_t id : response.leases()) out << id << "\n";
                        });
}

grpc::Status LeaseTimeToLive(CommandContext& c) {
  absl::StatusOr<int64_t> lease = ParseInt64(c.arg(0), "ID");
  if (!lease.ok()) return UsageError(lease.status());
  v1::LeaseTimeToLiveRequest request;
  request.set_lease(*lease);
  request.set_keys(c.invocation.FlagString("keys") == "true");
  return c.CallAndPrint(
      c.stub, &v1::KeyValueService::Stub::LeaseTimeToLive, request,
      [](std::ostream& out, const v1::LeaseTimeToLiveResponse& response) {
        out << "lease " << response.lease() << " granted with TTL("
            << absl::FormatDuration(absl::Milliseconds(response.granted_ttl_ms()))
            << "), remaining(" << absl::FormatDuration(absl::Milliseconds(response.remaining_ms()))
            << ")\n";
        for (const v1::LeaseKeyRef& key : response.keys()) {
          out << "  " << PrintableBytes(key.key()) << " (namespace " << key.namespace_() << ")\n";
        }
      });
}

grpc::Status LeaseRevoke(CommandContext& c) {
  absl::StatusOr<int64_t> lease = ParseInt64(c.arg(0), "ID");
  if (!lease.ok()) return UsageError(lease.status());
  v1::LeaseRevokeRequest request;
  request.set_lease(*lease);
  return c.CallAndPrint(c.stub, &v1::KeyValueService::Stub::LeaseRevoke, request,
                        [id = *lease](std::ostream& out, const v1::LeaseRevokeResponse& response) {
                          out << "lease " << id << " revoked, " << response.deleted()
                              << " keys deleted (revision " << response.revision() << ")\n";
                        });
}

grpc::Status KvCompact(CommandContext& c) {
  absl::StatusOr<int64_t> revision = ParseInt64(c.arg(0), "REV");
  if (!revision.ok()) return UsageError(revision.status());
  if (*revision <= 0) {
    return UsageError(absl::InvalidArgumentError(absl::StrCat("REV=", *revision, " must be > 0")));
  }
  v1::CompactRequest request;
  request.set_revision(*revision);
  return c.CallAndPrint(c.stub, &v1::KeyValueService::Stub::Compact, request,
                        [](std::ostream& out, const v1::CompactResponse& response) {
                          out << "compacted revision " << response.compacted_revision() << "\n";
                        });
}

// etcdctl's snapshot save: the stream into FILE.part, fsync, rename to FILE.
grpc::Status SnapshotSave(CommandContext& c) {
  const std::string path = c.arg(0);
  if (access(path.c_str(), F_OK) == 0) {
    return UsageError(absl::AlreadyExistsError(
        absl::StrCat(path, " exists: give a new file (the snapshot never overwrites one)")));
  }
  const std::string partial = path + ".part";
  const int fd = open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return UsageError(absl::FailedPreconditionError(
        absl::StrCat("cannot create ", partial, ": ", strerror(errno))));
  }
  grpc::ClientContext context;
  // A large database takes a while to copy and send: no --timeout here.
  std::unique_ptr<grpc::ClientReader<v1::SnapshotChunk>> reader =
      c.stub.Snapshot(&context, v1::SnapshotRequest());
  v1::SnapshotChunk chunk;
  int64_t written = 0, total = 0, revision = 0;
  bool write_failed = false;
  int write_errno = 0;
  while (reader->Read(&chunk)) {
    if (chunk.total_bytes() > 0) total = chunk.total_bytes();
    if (chunk.revision() > 0) revision = chunk.revision();
    const std::string& data = chunk.data();
    for (size_t done = 0; done < data.size() && !write_failed;) {
      const ssize_t n = write(fd, data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        write_failed = true;
        write_errno = errno;
        break;
      }
      done += static_cast<size_t>(n);
    }
    if (write_failed) {
      context.TryCancel();
      break;
    }
    written += static_cast<int64_t>(data.size());
  }
  grpc::Status status = reader->Finish();
  const bool synced = !write_failed && fsync(fd) == 0;
  if (!write_failed && !synced) write_errno = errno;
  close(fd);
  if (write_failed || !synced) {
    unlink(partial.c_str());
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat("writing ", partial, " failed: ", strerror(write_errno)));
  }
  if (!status.ok()) {
    unlink(partial.c_str());
    return status;
  }
  if (written != total) {
    unlink(partial.c_str());
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat("the snapshot stream ended after ", written, " of ", total,
                                     " bytes: take it again"));
  }
  if (rename(partial.c_str(), path.c_str()) != 0) {
    unlink(partial.c_str());
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat("rename ", partial, " to ", path, ": ", strerror(errno)));
  }
  if (c.json()) {
    c.out << absl::StrFormat(R"({"path":"%s","bytes":%d,"revision":%d})", absl::CEscape(path),
                             written, revision)
          << "\n";
  } else {
    c.out << "Snapshot saved at " << path << " (" << written << " bytes, revision " << revision
          << ")\n";
  }
  return grpc::Status::OK;
}

const std::map<std::string, Handler>& Handlers() {
  static const auto* handlers = [] {
    auto* all = new std::map<std::string, Handler>{
        {"kv put", KvPut},
        {"kv get", KvGet},
        {"kv list", KvList},
        {"kv del", KvDel},
        {"kv add", KvAdd},
        {"kv cas", KvCas},
        {"kv wait", KvWait},
        {"kv watch", KvWatch},
        {"kv compact", KvCompact},
        {"snapshot save", SnapshotSave},
        {"lease grant", LeaseGrant},
        {"lease keep-alive", LeaseKeepAlive},
        {"lease keepalive", LeaseKeepAlive},
        {"lease revoke", LeaseRevoke},
        {"lease list", LeaseList},
        {"lease timetolive", LeaseTimeToLive},
    };
    all->merge(JobCommandHandlers());
    all->merge(ClusterCommandHandlers());
    all->merge(NodeCommandHandlers());
    return all;
  }();
  return *handlers;
}

// The largest message a coordinator sends (its own receive cap, see
// coordinator/server/coordinator_server.cc).
constexpr int kMaxCoordinatorMessageBytes = 1 << 30;

// The channel every command's stubs share: TLS and bearer token from the
// global options; it reads whatever a coordinator may send (values up to
// 256 MiB with --max-value-bytes, messages capped at 1 GiB).
std::shared_ptr<grpc::Channel> CommandChannel(const std::string& address,
                                              const GlobalOptions& global) {
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(kMaxCoordinatorMessageBytes);
  return CoordinatorChannel(address, global.tls, global.token, channel_args);
}

// The exit code of command `name`'s outcome; a failure prints its one line on
// `err` (`channel` tells a coordinator that answered from one that did not).
int ExitCode(const grpc::Status& status, const std::string& name, const std::string& address,
             grpc::Channel& channel, absl::Duration timeout, std::ostream& err) {
  if (status.ok()) return kExitOk;
  const std::string message = status.error_message();
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT &&
      message.rfind("usage: ", 0) == 0) {
    err << "ddpctl: " << name << ": " << message.substr(7) << "\n";
    return kExitUsage;
  }
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      channel.GetState(false) == GRPC_CHANNEL_READY) {
    // The coordinator answered: show its own reason (e.g. a failing disk).
    err << "ddpctl: " << name << ": UNAVAILABLE from the coordinator at " << address << ": "
        << message << "\n";
    return kExitUnavailable;
  }
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    err << "ddpctl: coordinator at " << address
        << " is not answering or is shutting down (UNAVAILABLE: " << message
        << "); check --coordinator / $DDP_COORDINATOR and that it runs\n";
    return kExitUnavailable;
  }
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
      channel.GetState(false) != GRPC_CHANNEL_READY) {
    err << "ddpctl: coordinator at " << address
        << " is not answering (no connection within --timeout " << absl::FormatDuration(timeout)
        << ")\n";
    return kExitUnavailable;
  }
  err << "ddpctl: " << name << ": "
      << absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())) << ": "
      << message << "\n";
  return kExitError;
}

}  // namespace

int RunInvocation(const Invocation& invocation, absl::Notification& stop, std::ostream& out,
                  std::ostream& err) {
  const std::string name = absl::StrCat(invocation.command->group, " ", invocation.command->verb);
  auto handler = Handlers().find(name);
  if (handler == Handlers().end()) {
    err << "ddpctl: " << name << " is not implemented in this build\n";
    return kExitError;
  }
  // Several coordinators (HA): the command goes to the one that leads.
  std::string address = invocation.global.coordinator;
  if (address.find(',') != std::string::npos && name != "cluster status") {
    absl::StatusOr<std::string> leader =
        FindLeader(absl::StrSplit(address, ','), invocation.global);
    if (!leader.ok()) {
      err << "ddpctl: " << name << ": " << leader.status().message() << "\n";
      return kExitUnavailable;
    }
    address = *leader;
  }
  std::shared_ptr<grpc::Channel> channel = CommandChannel(address, invocation.global);
  std::unique_ptr<v1::KeyValueService::Stub> stub = v1::KeyValueService::NewStub(channel);
  std::unique_ptr<v1::JobService::Stub> jobs = v1::JobService::NewStub(channel);
  std::unique_ptr<v1::ClusterService::Stub> cluster = v1::ClusterService::NewStub(channel);
  std::unique_ptr<v1::NodeService::Stub> nodes = v1::NodeService::NewStub(channel);
  CommandContext context{invocation, *stub, *jobs, *cluster, *nodes, stop, out, err};
  grpc::Status status = handler->second(context);
  out.flush();
  return ExitCode(status, name, address, *channel, invocation.global.timeout, err);
}

}  // namespace ddp::ddpctl
