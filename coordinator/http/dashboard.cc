#include "coordinator/http/dashboard.h"

#include "coordinator/http/dashboard_assets.h"
#include "httplib.h"

namespace ddp::http {

void InstallDashboard(httplib::Server& server) {
  for (const DashboardAsset& asset : DashboardAssets()) {
    server.Get(asset.path, [&asset](const httplib::Request&, httplib::Response& response) {
      response.set_header("Cache-Control", "no-cache");
      response.set_content(asset.content, asset.content_type);
    });
  }
}

}  // namespace ddp::http
