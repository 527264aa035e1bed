#include "agent/descriptors/descriptor_updates.h"

#include <utility>

namespace ringside::agent {

void DescriptorUpdates::Put(Kind kind, uint64_t id, bool ended, std::string packet) {
  queue_.push_back(
      Update{kind, ended ? Update::Op::kPutEnded : Update::Op::kPut, id, std::move(packet)});
}

void DescriptorUpdates::End(Kind kind, uint64_t id) {
  queue_.push_back(Update{kind, Update::Op::kEnd, id, {}});
}

DescriptorUpdates::Batch DescriptorUpdates::Take() {
  Batch batch = std::exchange(queue_, std::move(spare_));
  spare_ = Batch();
  return batch;
}

void DescriptorUpdates::Apply(buffer::DurableStore* store, Batch* batch) {
  for (const Update& u : *batch) {
    switch (u.op) {
      case Update::Op::kPut:
        store->Put(u.kind, u.id, u.packet);
        break;
      case Update::Op::kPutEnded:
        store->PutEnded(u.kind, u.id, u.packet);
        break;
      case Update::Op::kEnd:
        store->MarkEnded(u.kind, u.id);
        break;
    }
  }
  batch->clear();
}

void DescriptorUpdates::GiveBack(Batch batch) {
  if (!batch.empty() || batch.capacity() > kMaxKept || batch.capacity() <= spare_.capacity()) {
    return;
  }
  spare_ = std::move(batch);
}

}  // namespace ringside::agent
