// output_file.hpp — an output file of the train CLI that never loses data silently: it is opened
// (and its header written) when created, which the trainer does before loading data, so a missing
// directory or a full disk stops the run at once; every row is written whole and flushed, and
// every write and the close are checked, so a failure ends the run with a message instead of an
// empty or truncated file. A run stopped by SIGINT/SIGTERM (train.cpp) stops between steps, so the
// file holds whole rows only.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace examples {

/// A failed open, write or close of an output; the message names the file and the reason.
struct output_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class output_file {
 public:
  output_file() = default;
  /// Creates (or truncates) `path` now and writes `header`; throws output_error.
  output_file(std::string path, std::string_view header) : path_(std::move(path)) {
    file_.reset(std::fopen(path_.c_str(), "w"));
    if (!file_) fail("cannot open");
    write(header);
  }

  bool is_open() const { return file_ != nullptr; }
  explicit operator bool() const { return is_open(); }
  const std::string& path() const { return path_; }

  /// Writes whole rows and flushes them to the file; throws output_error.
  void write(std::string_view text) {
    if (std::fwrite(text.data(), 1, text.size(), file_.get()) != text.size() || std::fflush(file_.get()) != 0)
      fail("cannot write");
  }

  /// Closes the file, checking that everything reached it; throws output_error.
  void close() {
    if (!file_) return;
    std::FILE* f = file_.release();
    if (std::fclose(f) != 0) fail("cannot close");
  }

 private:
  struct closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  [[noreturn]] void fail(const char* what) const {
    throw output_error(std::string(what) + " '" + path_ + "': " + std::strerror(errno));
  }

  std::string path_;
  std::unique_ptr<std::FILE, closer> file_;
};

}  // namespace examples
