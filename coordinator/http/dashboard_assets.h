#ifndef DDP_COORDINATOR_HTTP_DASHBOARD_ASSETS_H_
#define DDP_COORDINATOR_HTTP_DASHBOARD_ASSETS_H_

// The dashboard's files, generated at build time from dashboard/ (see the
// dashboard_assets genrule).

#include <vector>

namespace ddp::http {

struct DashboardAsset {
  const char* path;  // URL path: "/", "/dashboard.js", ...
  const char* content_type;
  const char* content;
};

const std::vector<DashboardAsset>& DashboardAssets();

}  // namespace ddp::http

#endif  // DDP_COORDINATOR_HTTP_DASHBOARD_ASSETS_H_
