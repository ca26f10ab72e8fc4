// minifloat/storage/memory_ledger.hpp — measured memory of a training run, by category: what
// the program itself allocates, not an estimate (extra-mantissa-bits paper §4, Table 3's memory
// column and Figure 2's breakdown; docs/no-master-weights.md).
//
// A memory_ledger counts bytes per category (weights, extra bits, gradients, ...): the current
// amount, each category's own peak, the peak of the total and the breakdown at the moment that
// total peak was reached. Bytes reach it two ways:
//  - tracking_allocator<T>: a standard allocator that charges every allocation to (ledger,
//    category); containers built with it (std::vector<float, tracking_allocator<float>>) are
//    counted exactly, reallocations included. A default-constructed one charges nothing.
//  - ledger_charge: an RAII charge of a byte count, for buffers owned by types that take no
//    allocator (a split_tensor's packed words, an optimizer's state vectors); the owner resizes
//    it to the container's actual size whenever that changes.
// A ledger must outlive everything charged to it. It is not thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string_view>
#include <utility>

namespace minifloat::storage {

enum class memory_category : std::uint8_t {
  weights,               ///< the stored weight: fp32 master values, or the visible codes
  extra_bits,            ///< the packed extra mantissa bits of split storage
  compute_copy,          ///< θ̂, the copy forward and backward read
  gradients,             ///< parameter gradients
  optimizer_state,       ///< momentum buffers, Adam moments
  activations,           ///< layer outputs and what layers keep for backward
  activation_gradients,  ///< dLoss/dY
  journal,               ///< stored state saved for a rollback of fused updates
  count_,
};

inline constexpr std::size_t memory_category_count = static_cast<std::size_t>(memory_category::count_);

constexpr std::string_view name(memory_category c) {
  switch (c) {
    case memory_category::weights: return "weights";
    case memory_category::extra_bits: return "extra_bits";
    case memory_category::compute_copy: return "compute_copy";
    case memory_category::gradients: return "gradients";
    case memory_category::optimizer_state: return "optimizer_state";
    case memory_category::activations: return "activations";
    case memory_category::activation_gradients: return "activation_gradients";
    case memory_category::journal: return "journal";
    case memory_category::count_: break;
  }
  return "?";
}

/// Bytes per category.
using memory_breakdown = std::array<std::size_t, memory_category_count>;

class memory_ledger {
 public:
  memory_ledger() = default;
  memory_ledger(const memory_ledger&) = delete;  // allocators point at it
  memory_ledger& operator=(const memory_ledger&) = delete;

  void charge(memory_category c, std::size_t bytes) {
    const auto i = static_cast<std::size_t>(c);
    current_[i] += bytes;
    total_ += bytes;
    if (current_[i] > peak_[i]) peak_[i] = current_[i];
    if (total_ > peak_total_) {
      peak_total_ = total_;
      at_peak_ = current_;
    }
  }
  void release(memory_category c, std::size_t bytes) {
    current_[static_cast<std::size_t>(c)] -= bytes;
    total_ -= bytes;
  }

  std::size_t current(memory_category c) const { return current_[static_cast<std::size_t>(c)]; }
  std::size_t current_total() const { return total_; }
  /// The largest amount the category held at any time.
  std::size_t peak(memory_category c) const { return peak_[static_cast<std::size_t>(c)]; }
  std::size_t peak_total() const { return peak_total_; }
  /// What each category held when the total reached peak_total() (first time).
  const memory_breakdown& breakdown_at_peak() const { return at_peak_; }

  /// Forgets the peaks: they restart from what is held now (e.g. to measure steady state
  /// after set-up).
  void reset_peaks() {
    peak_ = current_;
    peak_total_ = total_;
    at_peak_ = current_;
  }

 private:
  memory_breakdown current_{};
  memory_breakdown peak_{};
  memory_breakdown at_peak_{};
  std::size_t total_ = 0;
  std::size_t peak_total_ = 0;
};

/// A standard allocator charging (ledger, category); without a ledger it only allocates.
template <class T>
class tracking_allocator {
 public:
  using value_type = T;
  // Containers keep their allocator (and so their category) when assigned from another
  // container; moves and swaps carry it along.
  using propagate_on_container_copy_assignment = std::false_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;

  tracking_allocator() = default;
  tracking_allocator(memory_ledger* ledger, memory_category c) : ledger_(ledger), category_(c) {}
  template <class U>
  tracking_allocator(const tracking_allocator<U>& o) : ledger_(o.ledger()), category_(o.category()) {}

  T* allocate(std::size_t n) {
    T* p = std::allocator<T>{}.allocate(n);
    if (ledger_ != nullptr) ledger_->charge(category_, n * sizeof(T));
    return p;
  }
  void deallocate(T* p, std::size_t n) {
    if (ledger_ != nullptr) ledger_->release(category_, n * sizeof(T));
    std::allocator<T>{}.deallocate(p, n);
  }

  memory_ledger* ledger() const { return ledger_; }
  memory_category category() const { return category_; }

  template <class U>
  friend bool operator==(const tracking_allocator& a, const tracking_allocator<U>& b) {
    return a.ledger() == b.ledger() && a.category() == b.category();
  }

 private:
  memory_ledger* ledger_ = nullptr;
  memory_category category_ = memory_category::activations;
};

/// Re-homes a container's elements into storage from `alloc` (charged to its ledger from now on).
template <class Container>
void track(Container& c, const typename Container::allocator_type& alloc) {
  Container moved(c.begin(), c.end(), alloc);
  c = std::move(moved);  // move assignment carries the new allocator along
}

/// An RAII charge of a byte count that its owner keeps equal to a buffer's size.
class ledger_charge {
 public:
  ledger_charge() = default;
  ledger_charge(memory_ledger* ledger, memory_category c, std::size_t bytes = 0) : ledger_(ledger), category_(c) {
    resize(bytes);
  }
  ledger_charge(const ledger_charge&) = delete;
  ledger_charge& operator=(const ledger_charge&) = delete;
  ledger_charge(ledger_charge&& o) noexcept
      : ledger_(std::exchange(o.ledger_, nullptr)), category_(o.category_), bytes_(std::exchange(o.bytes_, 0)) {}
  ledger_charge& operator=(ledger_charge&& o) noexcept {
    if (this != &o) {
      resize(0);
      ledger_ = std::exchange(o.ledger_, nullptr);
      category_ = o.category_;
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  ~ledger_charge() { resize(0); }

  void resize(std::size_t bytes) {
    if (ledger_ == nullptr) return;
    if (bytes > bytes_) ledger_->charge(category_, bytes - bytes_);
    else ledger_->release(category_, bytes_ - bytes);
    bytes_ = bytes;
  }
  std::size_t bytes() const { return bytes_; }

 private:
  memory_ledger* ledger_ = nullptr;
  memory_category category_ = memory_category::activations;
  std::size_t bytes_ = 0;
};

}  // namespace minifloat::storage
