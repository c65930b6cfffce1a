// A bounded, thread-safe cache of built plans (cuDNN graphs): least recently used out first.
// get() returns the cached value or builds it with build() outside the lock (two threads
// missing on one key both build; the first to finish is kept and both get it), so a slow
// build never blocks hits on other keys. Values are shared_ptr: one evicted while a caller
// still runs it lives until that caller drops it.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace normtune {

template <typename Key, typename Value, typename Hash = std::hash<Key>>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  template <typename Build>
  std::shared_ptr<Value> get(const Key& key, Build&& build) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = index_.find(key); it != index_.end()) {
        order_.splice(order_.begin(), order_, it->second);  // most recently used
        ++hits_;
        return it->second->second;
      }
    }
    std::shared_ptr<Value> built = build();
    std::lock_guard<std::mutex> lock(mutex_);
    ++builds_;
    if (auto it = index_.find(key); it != index_.end()) {  // another thread built it meanwhile
      order_.splice(order_.begin(), order_, it->second);
      return it->second->second;
    }
    order_.emplace_front(key, built);
    index_.emplace(key, order_.begin());
    while (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
    return built;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return order_.size();
  }
  size_t capacity() const { return capacity_; }
  size_t hits() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return hits_;
  }
  size_t builds() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return builds_;
  }

 private:
  using Item = std::pair<Key, std::shared_ptr<Value>>;
  const size_t capacity_;
  mutable std::mutex mutex_;
  std::list<Item> order_;  // most recently used first
  std::unordered_map<Key, typename std::list<Item>::iterator, Hash> index_;
  size_t hits_ = 0, builds_ = 0;
};

}  // namespace normtune
