#ifndef DDP_COORDINATOR_HTTP_DASHBOARD_H_
#define DDP_COORDINATOR_HTTP_DASHBOARD_H_

// The web dashboard: static files (dashboard/index.html, .js, .css) compiled
// into the binary, so it works offline with nothing beside the binary. The
// page talks to the REST API and follows job events as Server-Sent Events.

namespace httplib {
class Server;
}  // namespace httplib

namespace ddp::http {

// GET / (index.html), /dashboard.js, /dashboard.css.
void InstallDashboard(httplib::Server& server);

}  // namespace ddp::http

#endif  // DDP_COORDINATOR_HTTP_DASHBOARD_H_
