#ifndef RINGSIDE_BUFFER_INTERNAL_CIRCULAR_QUEUE_H_
#define RINGSIDE_BUFFER_INTERNAL_CIRCULAR_QUEUE_H_

#include <cstddef>
#include <utility>
#include <vector>

namespace ringside::buffer::internal {

// A FIFO over a power-of-two ring that grows by doubling: push_back and
// pop_front are O(1) and allocate only when the queue outgrows its largest
// size so far (a steady producer/consumer never allocates). Random access and
// a middle insert (O(n), for the rare out-of-order chunk) are supported.
// Copyable (the buffer clones its sequences with it).
template <typename T>
class CircularQueue {
 public:
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  T& operator[](size_t i) { return items_[(head_ + i) & (items_.size() - 1)]; }
  const T& operator[](size_t i) const { return items_[(head_ + i) & (items_.size() - 1)]; }
  T& front() { return (*this)[0]; }
  T& back() { return (*this)[size_ - 1]; }
  const T& front() const { return (*this)[0]; }
  const T& back() const { return (*this)[size_ - 1]; }

  void push_back(T value) {
    Reserve(size_ + 1);
    items_[(head_ + size_) & (items_.size() - 1)] = std::move(value);
    size_++;
  }

  void pop_front() {
    head_ = (head_ + 1) & (items_.size() - 1);
    size_--;
  }

  // Inserts `value` so that it becomes element `pos` (0 <= pos <= size()).
  void insert(size_t pos, T value) {
    Reserve(size_ + 1);
    size_++;
    for (size_t i = size_ - 1; i > pos; i--) (*this)[i] = std::move((*this)[i - 1]);
    (*this)[pos] = std::move(value);
  }

  // Removes element `pos`.
  void erase(size_t pos) {
    for (size_t i = pos; i + 1 < size_; i++) (*this)[i] = std::move((*this)[i + 1]);
    size_--;
  }

  void clear() {
    head_ = 0;
    size_ = 0;
  }

 private:
  void Reserve(size_t n) {
    if (n <= items_.size()) return;
    size_t capacity = items_.empty() ? 8 : items_.size() * 2;
    while (capacity < n) capacity *= 2;
    std::vector<T> grown(capacity);
    for (size_t i = 0; i < size_; i++) grown[i] = std::move((*this)[i]);
    items_ = std::move(grown);
    head_ = 0;
  }

  std::vector<T> items_;
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace ringside::buffer::internal

#endif  // RINGSIDE_BUFFER_INTERNAL_CIRCULAR_QUEUE_H_
