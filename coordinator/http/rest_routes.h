#ifndef DDP_COORDINATOR_HTTP_REST_ROUTES_H_
#define DDP_COORDINATOR_HTTP_REST_ROUTES_H_

// The REST API: one table that maps each HTTP route to the gRPC method it
// calls. The gateway serves exactly these routes and the API docs list exactly
// these (rest_routes_test checks docs/api.md against the table).

#include <string>
#include <vector>

namespace ddp::http {

struct RestRoute {
  std::string http_method;  // GET, POST, PUT, PATCH, DELETE
  std::string path;         // grpc-gateway template, e.g. "/v1/jobs/{job_id}:cancel"
  std::string grpc_method;  // e.g. "/ddp.v1.JobService/CancelJob"
  // "*": the JSON body is the request message; "": no body (fields come from
  // the path and query parameters only).
  std::string body;
  // A server-streaming method, served as Server-Sent Events. A reconnecting
  // client's Last-Event-ID (the `event_id_field` of the last event it got)
  // resumes the stream at `resume_field` = that id + 1.
  bool stream = false;
  std::string event_id_field;
  std::string resume_field;
  std::string summary;       // one line for the docs
  std::string curl_example;  // arguments after `curl -s`, for the docs
};

// In match order: a route with a ":verb" comes before the route it extends.
const std::vector<RestRoute>& RestRoutes();

}  // namespace ddp::http

#endif  // DDP_COORDINATOR_HTTP_REST_ROUTES_H_
