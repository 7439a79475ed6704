// The rows of ddpctl's command table. Handlers: kv and lease in
// grpc_commands.cc, jobs in grpc_job_commands.cc.

#include "tools/ddpctl/command_line.h"

namespace ddp::ddpctl {

const std::vector<CommandSpec>& CommandTable() {
  static const auto* table = new std::vector<CommandSpec>{
      {"kv",
       "put",
       "Store VALUE under KEY (durable when the call returns)",
       {{"KEY", "Key (non-empty bytes)"}, {"VALUE", "Value (bytes)"}},
       {{"lease", FlagKind::kInt64, "ID", "Attach the key to this lease (deleted when it expires)"},
        {"if-absent", FlagKind::kBool, "", "Fail if the key already exists"},
        {"expect-revision", FlagKind::kInt64, "REV",
         "Fail unless the key's mod revision is REV (0: must be absent)"},
        {"prev", FlagKind::kBool, "", "Print the previous value, if any"}},
       "A condition that does not hold (--if-absent, --expect-revision) is not\n"
       "an error, as etcdctl's txn: FAILURE on stdout (--json:\n"
       "{\"succeeded\":false,...}), the reason on stderr, exit 0. Scripts test\n"
       "the output, not the exit code, as for `kv cas`."},
      {"kv",
       "get",
       "Print the value of KEY",
       {{"KEY", "Key to read"}},
       {{"print-value-only", FlagKind::kBool, "",
         "Print the value's bytes as stored (default: C-escaped when not printable text)"},
        {"rev", FlagKind::kInt64, "REV",
         "Read KEY as it was at revision REV (default: now), as etcdctl's get --rev"}},
       "A missing key exits 1 with NOT_FOUND (also one that did not exist at\n"
       "--rev). --rev fails with OUT_OF_RANGE for a revision in the future or\n"
       "below the compacted revision (`cluster status` shows it), and for a\n"
       "value written at or before the compacted revision that changed since:\n"
       "the coordinator keeps the changes after the compacted revision, not\n"
       "the keys as they were at it (etcd keeps that one version too); the\n"
       "message names the first revision that can be read."},
      {"kv",
       "list",
       "List keys starting with PREFIX, in key order",
       {{"PREFIX", "Key prefix (default: the whole namespace)", true}},
       {{"limit", FlagKind::kInt64, "N", "Print at most N keys (default: all)"},
        {"keys-only", FlagKind::kBool, "", "Print keys without values"}},
       ""},
      {"kv",
       "del",
       "Delete KEY (or every key starting with KEY with --prefix)",
       {{"KEY", "Key, or prefix with --prefix"}},
       {{"prefix", FlagKind::kBool, "", "Delete every key starting with KEY"}},
       "Prints the number of keys deleted (0 is not an error)."},
      {"kv",
       "add",
       "Atomically add DELTA to the integer stored in KEY (missing = 0)",
       {{"KEY", "Key holding a decimal int64"}, {"DELTA", "Signed decimal int64 to add"}},
       {},
       "Prints the new value."},
      {"kv",
       "cas",
       "Set KEY to DESIRED if its value equals EXPECTED (missing key = \"\")",
       {{"KEY", "Key"},
        {"EXPECTED", "Expected current value (\"\" for a missing key)"},
        {"DESIRED", "Value to store"}},
       {},
       "Prints SUCCESS or FAILURE (as etcdctl's txn), then the value after the\n"
       "call. Not swapped is not an error: exit 0, as for `kv put --if-absent`."},
      {"kv",
       "wait",
       "Block until every KEY exists",
       {{"KEY", "Keys to wait for", false, true}},
       {},
       "Gives up after --timeout (DEADLINE_EXCEEDED, exit 1)."},
      {"kv",
       "watch",
       "Print every change of KEY (with --prefix: of keys starting with KEY) until Ctrl-C",
       {{"KEY", "Key; with --prefix a prefix (none: the whole namespace)", true}},
       {{"prefix", FlagKind::kBool, "", "Watch every key starting with KEY (as etcdctl)"},
        {"from-revision", FlagKind::kInt64, "REV",
         "Replay history from revision REV (default: only new changes)"}},
       "--timeout does not apply to the stream, only to connecting.\n"
       "OUT_OF_RANGE means REV was compacted: list, then watch from the\n"
       "list's revision + 1."},
      {"kv",
       "compact",
       "Drop the watch history before revision REV (as etcdctl compact)",
       {{"REV", "Revision (at most the current revision + 1)"}},
       {},
       "Prints \"compacted revision C\": history up to C (= REV - 1, or an\n"
       "earlier compaction's if that went further) is gone; a watch from C or\n"
       "earlier gets OUT_OF_RANGE, one from REV still replays. The coordinator\n"
       "also compacts by itself (--history-revisions)."},
      {"lease",
       "grant",
       "Create a lease that expires TTL after its last keepalive",
       {{"TTL", "Time to live, e.g. 10s, 1m30s"}},
       {},
       "Prints the lease id alone (LEASE=$(ddpctl lease grant 10s)); --json\n"
       "prints it with its ttl. The lease belongs to --namespace if given, else\n"
       "to the job of the token (none with the admin token): only that job's\n"
       "token (and the admin token) may keep it alive, revoke it or attach\n"
       "keys to it; another job gets PERMISSION_DENIED."},
      {"lease",
       "keep-alive",
       "Renew lease ID every ttl/3 until Ctrl-C",
       {{"ID", "Lease id"}},
       {{"once", FlagKind::kBool, "", "Renew once and exit"}},
       "Exits 1 with NOT_FOUND if the lease expired or was revoked."},
      {"lease",
       "keepalive",
       "The same as lease keep-alive (its earlier name)",
       {{"ID", "Lease id"}},
       {{"once", FlagKind::kBool, "", "Renew once and exit"}},
       "Exits 1 with NOT_FOUND if the lease expired or was revoked."},
      {"lease",
       "list",
       "Print the ids of the leases this token may use, one a line, ascending",
       {},
       {},
       "As etcdctl's lease list without its \"found N leases\" line, so that\n"
       "`for id in $(ddpctl lease list)` works. A job's token lists its job's\n"
       "leases; the admin token every one."},
      {"lease",
       "timetolive",
       "Print the granted TTL and the time left of lease ID",
       {{"ID", "Lease id"}},
       {{"keys", FlagKind::kBool, "", "Also list the keys attached to it"}},
       "\"lease ID granted with TTL(10s), remaining(7.5s)\" as etcdctl, then with\n"
       "--keys one key a line. Exits 1 with NOT_FOUND if the lease expired or\n"
       "was revoked."},
      {"lease",
       "revoke",
       "Revoke lease ID and delete its keys",
       {{"ID", "Lease id"}},
       {},
       "Prints the number of keys deleted."},
      {"jobs",
       "list",
       "List jobs: id, state, generation, restarts, members, spares",
       {},
       {{"state", FlagKind::kString, "STATE", "Only jobs in STATE; repeatable or comma-separated",
         true},
        {"all-runs", FlagKind::kBool, "",
         "Past runs of each job id too (a RUN column; a finished id that starts again is its "
         "next run)"}},
       "STATE is WAITING, STARTING, RUNNING, RESTARTING, SUCCEEDED, FAILED or\n"
       "CANCELLED (any case). With --json, one object a job per line."},
      {"jobs",
       "get",
       "Show a job: settings, state, members, spares, excluded nodes, "
       "failures",
       {{"JOB", "Job id (torchrun's rdzv_id)"}},
       {{"run", FlagKind::kInt64, "N",
         "That run of the job id (jobs list --all-runs lists them); default: the current run"}},
       "An unknown job or run exits 1 with NOT_FOUND. Failures are listed oldest\n"
       "first; the root cause is the failure that exhausted the restart "
       "budget."},
      {"jobs",
       "logs",
       "Show the output the coordinator keeps of JOB's failed workers",
       {{"JOB", "Job id"}},
       {{"rank", FlagKind::kInt64, "R", "Failures of global rank R (every retained one)"},
        {"generation", FlagKind::kInt64, "G", "Failures of generation G"}},
       "Without --rank or --generation: the root cause (else the newest failure).\n"
       "Each failure: its line as in jobs get, where the worker's whole stderr is\n"
       "(NODE:PATH, on that node), its Python traceback (from its error file, else\n"
       "from stderr) and the last lines of its stderr (at most 64 lines / 8 KiB,\n"
       "secret values redacted by the agent). The coordinator keeps that output for\n"
       "the newest 8 failures of a job and its root cause. None matching exits 1\n"
       "with NOT_FOUND."},
      {"jobs",
       "create",
       "Create job JOB (idempotent with the same settings)",
       {{"JOB", "Job id, [A-Za-z0-9._:-]"}},
       {{"nnodes", FlagKind::kString, "N|MIN:MAX",
         "Number of nodes, or a range for elastic jobs (default 1)"},
        {"nproc-per-node", FlagKind::kInt64, "N",
         "Workers of a node that does not say (default 1)"},
        {"max-restarts", FlagKind::kInt64, "N",
         "Restarts allowed after worker failures (default 0)"},
        {"join-timeout", FlagKind::kDuration, "DURATION",
         "How long the rendezvous waits for MIN nodes (default 600s)"},
        {"last-call-timeout", FlagKind::kDuration, "DURATION",
         "Extra wait for more nodes once MIN joined (default 30s)"},
        {"heartbeat-timeout", FlagKind::kDuration, "DURATION",
         "A node silent this long is lost (default 3s)"},
        {"shutdown-timeout", FlagKind::kDuration, "DURATION",
         "How long members get to stop their workers (default 30s)"},
        {"hang-timeout", FlagKind::kDuration, "DURATION",
         "A hang: every member's workers without CPU or I/O this long (default 10s; 0 off, "
         "else at least 2s)"}},
       "Unset flags take the coordinator's defaults. Creating an existing job\n"
       "with other settings exits 1 with ALREADY_EXISTS."},
      {"jobs",
       "watch",
       "Print the events of job JOB until it finishes or Ctrl-C",
       {{"JOB", "Job id"}},
       {{"from-index", FlagKind::kInt64, "N",
         "First event index to print (default 1: every retained event; "
         "0: only new events)"}},
       "Exits 0 when the job finishes (the stream ends after JOB_FINISHED).\n"
       "--timeout does not apply to the stream. OUT_OF_RANGE means older\n"
       "events were dropped: watch from the index the message names."},
      {"jobs",
       "update",
       "Change the node range of job JOB",
       {{"JOB", "Job id"}},
       {{"nnodes", FlagKind::kString, "MIN:MAX", "New node range (required)"}},
       "A finished job exits 1 with FAILED_PRECONDITION."},
      {"jobs",
       "cancel",
       "Cancel job JOB: its members stop their workers",
       {{"JOB", "Job id"}},
       {{"reason", FlagKind::kString, "TEXT", "Why (kept in the job's status)"}},
       "Prints the job after the call. A finished job exits 1 with\n"
       "FAILED_PRECONDITION."},
      {"jobs",
       "exclude",
       "Exclude node NODE from job JOB (it may not join again)",
       {{"JOB", "Job id"}, {"NODE", "Node id"}},
       {{"reason", FlagKind::kString, "TEXT", "Why (kept in the job's status)"}},
       "A member is dismissed and the job restarts without it (membership\n"
       "changes do not count against --max-restarts)."},
      {"jobs",
       "delete",
       "Forget finished job JOB (state, members, events); its id is free again",
       {{"JOB", "Job id"}},
       {{"force", FlagKind::kBool, "", "Cancel the job first if it still runs"}},
       "A job that still runs exits 1 with FAILED_PRECONDITION unless --force.\n"
       "A finished job id can also simply be started again (a new run)."},
      {"jobs",
       "token",
       "Issue job JOB a new bearer token (the old one stops working); admin only",
       {{"JOB", "Job id"}},
       {{"revoke", FlagKind::kBool, "", "Leave the job without a token instead"}},
       "Needs a coordinator with authorization on (--admin-token-file) and\n"
       "the admin token. The token is printed once, alone on stdout\n"
       "(TOKEN=$(ddpctl jobs token J)), the job's summary and advice on stderr;\n"
       "the coordinator keeps its hash."},
      {"jobs",
       "stacks",
       "Show the Python stack of every worker of running job JOB, ranks grouped by stack",
       {{"JOB", "Job id"}},
       {{"wait", FlagKind::kDuration, "DURATION",
         "How long the coordinator waits for the nodes' answers (default 5s, at most 60s)"},
        {"at-hang", FlagKind::kBool, "",
         "The stacks every node took when the job's last hang was declared, before the stop"}},
       "Every agent signals its workers (SIGUSR2: faulthandler, registered by the\n"
       "agent's sitecustomize.py; the workers pause for a moment). The smallest\n"
       "group comes first: a rank that is somewhere else stands out. Nodes that\n"
       "do not answer in time are named; their ranks show 'no stack'.\n"
       "A job that is not RUNNING exits 1 with FAILED_PRECONDITION. With --at-hang,\n"
       "nobody is asked: any job state; NOT_FOUND when no hang was declared since\n"
       "the coordinator started (kept in its memory)."},
      {"snapshot",
       "save",
       "Save a consistent copy of the coordinator's database to FILE",
       {{"FILE", "A new file (written as FILE.part, synced, then renamed)"}},
       {},
       "As etcdctl's snapshot save (admin token when authorization is on). The\n"
       "copy is coordinator.db as of the last commit before it began; restore\n"
       "it into an empty data dir and start the coordinator on it:\n"
       "  mkdir /var/lib/ddp-new && cp FILE /var/lib/ddp-new/coordinator.db\n"
       "  coordinator --data-dir /var/lib/ddp-new ...\n"
       "With --store etcd:// it fails with FAILED_PRECONDITION: use\n"
       "`etcdctl snapshot save` against etcd. No --timeout: a large database\n"
       "takes a while."},
      {"nodes",
       "list",
       "Every node the coordinator knows (the fleet): state, incidents, last job",
       {},
       {},
       "A node is known from its first Register or health check, in any job.\n"
       "STATE: READY, CORDONED (ddpctl nodes cordon) or QUARANTINED (the\n"
       "coordinator's --quarantine-after N --quarantine-window W). A cordoned or\n"
       "quarantined node is refused by every job."},
      {"nodes",
       "get",
       "Show node NODE: state and why, health checks with their output, incidents",
       {{"NODE", "Node id (the agent's --node-id, its hostname by default)"}},
       {},
       "Incidents are what went wrong on the node, newest last: worker failures\n"
       "with their cause, hangs, lost leases, failed health checks, with the job,\n"
       "generation and time. \"(not counted)\": a knock-on of another node's\n"
       "failure, or before the node was last uncordoned. Exits 1 (NOT_FOUND) for a\n"
       "node the coordinator never saw."},
      {"nodes",
       "cordon",
       "Refuse node NODE to every job from now on (admin)",
       {{"NODE", "Node id"}},
       {{"reason", FlagKind::kString, "TEXT", "Why (shown with the node and to the agent)"}},
       "A node already running a job goes on; its next Register (a new job, a\n"
       "restarted agent) is refused with FAILED_PRECONDITION naming the reason.\n"
       "A node never seen is recorded cordoned. Undo with `nodes uncordon`."},
      {"nodes",
       "uncordon",
       "Let node NODE join jobs again (from CORDONED or QUARANTINED; admin)",
       {{"NODE", "Node id"}},
       {},
       "Its incidents stay in the ledger but no longer count for quarantine."},
      {"nodes",
       "policy",
       "Show or set the cluster's quarantine policy (set: admin)",
       {{"ACTION", "get (default) or set", /*optional=*/true}},
       {{"after", FlagKind::kInt64, "N",
         "set: quarantine a node after N counted incidents (0: never; at most 1000000)"},
        {"window", FlagKind::kDuration, "DURATION",
         "set: the window the incidents are counted in (default 1h, 1s..720h)"}},
       "The policy set here is stored: it survives a coordinator restart and\n"
       "wins over the coordinator's --quarantine-after/--quarantine-window, which\n"
       "are the policy only while none was ever set. A change applies from the\n"
       "next incident on; quarantined nodes stay so until uncordoned."},
      {"nodes",
       "drain",
       "Drain node NODE: its jobs go on without it, no restart budget spent",
       {{"NODE", "Node id"}},
       {{"grace", FlagKind::kDuration, "DURATION",
         "Leave by then at the latest (default 120s, at most 168h)"},
        {"job", FlagKind::kString, "JOB", "Only this job (default: every job the node is in)"},
        {"reason", FlagKind::kString, "TEXT", "Why (in the jobs' events and the node's status)"}},
       "Every worker of the node's jobs gets the preemption notice\n"
       "(ddp_coordinator.preemption_pending(); docs/worker-contract.md). A job\n"
       "goes on without the node as soon as every one of its workers called\n"
       "ddp_coordinator.ready_to_leave(), or when the grace ends: a hot spare\n"
       "takes its place, or it runs smaller within --nnodes MIN:MAX. No failure\n"
       "is recorded. A node that runs no workers (a spare) leaves at once.\n"
       "Prints the jobs and the deadline; NOT_FOUND when no job knows NODE."},
      {"cluster",
       "status",
       "Which coordinator leads, each coordinator's role, the etcd members' health",
       {},
       {},
       "Asks every coordinator of --coordinator (a comma-separated list) and the\n"
       "etcd members of --store through the one that answers first. As etcdctl's\n"
       "endpoint status: one row a coordinator (ROLE, IS LEADER, LEADER,\n"
       "REVISION, COMPACTED, VERSION, DB SIZE, STORE; a standby serves no\n"
       "reads: \"-\"; DB SIZE is SQLite's coordinator.db with its -wal), then\n"
       "the etcd members (health, version, raft leader, db size), the leader\n"
       "lease and the leader changes each coordinator has seen."},
  };
  return *table;
}

}  // namespace ddp::ddpctl
