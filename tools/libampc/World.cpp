//===- World.cpp - ampc/World.h over runtime/dist's Communicator -----------===//
#include "ampc/World.h"

#include "WorldInternal.h"

namespace ampc::api {

World::World(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
World::~World() = default;

Result<std::shared_ptr<World>> World::join() {
  if (!dist::launchedByMpiLauncher())
    return single();
  std::string err;
  std::unique_ptr<dist::Communicator> comm = dist::createMpiCommunicator(err);
  if (!comm)
    return Status::error("started by an MPI launcher, but " + err);
  auto impl = std::make_unique<Impl>();
  impl->comm = std::move(comm);
  return std::shared_ptr<World>(new World(std::move(impl)));
}

std::shared_ptr<World> World::single() {
  auto impl = std::make_unique<Impl>();
  impl->comm = dist::createLocalCommunicator();
  return std::shared_ptr<World>(new World(std::move(impl)));
}

std::shared_ptr<World> World::planning(int size) {
  auto impl = std::make_unique<Impl>();
  impl->comm = dist::createPlanningCommunicator(size);
  return std::shared_ptr<World>(new World(std::move(impl)));
}

int World::rank() const { return impl_->comm->rank(); }
int World::size() const { return impl_->comm->size(); }
std::string World::engine() const { return impl_->comm->name().str(); }
void World::setCollectiveTimeout(double seconds) { impl_->comm->setTimeout(seconds); }
bool World::failedTogether() const { return impl_->comm->failedTogether(); }
void World::abort(int code) { impl_->comm->abort(code); }

} // namespace ampc::api
