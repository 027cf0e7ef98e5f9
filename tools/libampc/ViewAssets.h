//===- ViewAssets.h - The style sheet and script of `ampc view`'s page ----===//
#ifndef AMPC_TOOLS_LIBAMPC_VIEWASSETS_H
#define AMPC_TOOLS_LIBAMPC_VIEWASSETS_H

namespace ampc::api {

/// Inlined into every page: it must work from a file with no network.
extern const char kViewStyle[];
/// Reads the page's #ampc-nodes JSON; see ViewAssets.cpp.
extern const char kViewScript[];

} // namespace ampc::api

#endif
