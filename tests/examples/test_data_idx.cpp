// The example trainer's data side: the gzip IDX reader on hand-made files (and every way such a
// file can be broken), the Fashion-MNIST loader's errors, seeded shuffling and batching, and the
// real Debian data set when it is installed.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "data/batches.hpp"
#include "data/fashion_mnist.hpp"
#include "data/idx.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

using bytes = std::vector<std::uint8_t>;

/// A fresh directory, removed with everything in it at the end of the test.
struct scratch_dir {
  fs::path path;
  scratch_dir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("minifloat_test_data_" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~scratch_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
};

bytes idx(std::uint8_t type, const std::vector<std::uint32_t>& dims, const bytes& payload) {
  bytes out = {0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(d >> shift));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

void write_gz(const fs::path& p, const bytes& content) {
  gzFile f = gzopen(p.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, content.data(), static_cast<unsigned>(content.size())) == static_cast<int>(content.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

void write_raw(const fs::path& p, const bytes& content) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(content.data()),
                                           static_cast<std::streamsize>(content.size()));
}

bytes read_raw(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return bytes(std::istreambuf_iterator<char>(in), {});
}

bytes pixels(std::size_t n) {
  bytes p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(i * 37 % 256);
  return p;
}

std::string error_of(const fs::path& p, std::size_t rank) {
  try {
    (void)data::read_idx(p, rank);
  } catch (const data::idx_error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("read_idx reads hand-made gzip and plain IDX files", "[data][idx]") {
  scratch_dir dir;
  const bytes px = pixels(5 * 3 * 4);
  write_gz(dir.path / "images.gz", idx(0x08, {5, 3, 4}, px));
  const data::idx_array a = data::read_idx(dir.path / "images.gz", 3);
  CHECK(a.dims == std::vector<std::size_t>{5, 3, 4});
  CHECK(a.values == px);

  write_raw(dir.path / "labels", idx(0x08, {5}, {1, 0, 4, 9, 2}));  // uncompressed works too
  CHECK(data::read_idx(dir.path / "labels", 1).values == bytes{1, 0, 4, 9, 2});

  write_gz(dir.path / "labels.gz", idx(0x08, {5}, {1, 0, 4, 9, 2}));
  const data::image_dataset d = data::load_idx_dataset(dir.path / "images.gz", dir.path / "labels.gz", 10);
  CHECK(d.size() == 5);
  CHECK(d.rows == 3);
  CHECK(d.cols == 4);
  CHECK(d.pixels == px);
  CHECK(d.labels == bytes{1, 0, 4, 9, 2});
}

TEST_CASE("read_idx names the file and the problem for missing, corrupt and truncated files", "[data][idx]") {
  scratch_dir dir;
  const fs::path p = dir.path / "f.gz";
  const std::string where = p.string();

  CHECK_THAT(error_of(dir.path / "missing.gz", 3), Contains((dir.path / "missing.gz").string()) && Contains("no such file"));
  CHECK_THAT(error_of(dir.path, 3), Contains("directory"));

  write_gz(p, {});
  CHECK_THAT(error_of(p, 3), Contains(where) && Contains("magic"));
  write_gz(p, idx(0x08, {2, 2, 2}, pixels(8)));
  CHECK_THAT(error_of(p, 1), Contains(where) && Contains("bad magic number 0x00000803, expected 0x00000801"));
  write_gz(p, idx(0x0D, {2, 2, 2}, pixels(8)));  // floats, not bytes
  CHECK_THAT(error_of(p, 3), Contains("bad magic number 0x00000d03"));
  write_gz(p, idx(0x08, {2, 0, 2}, {}));
  CHECK_THAT(error_of(p, 3), Contains("dimension 1 is zero"));
  write_gz(p, bytes{0, 0, 8, 3, 0, 0, 0, 2, 0, 0});
  CHECK_THAT(error_of(p, 3), Contains("header ends inside dimension 1"));
  write_gz(p, idx(0x08, {0xffffffffU, 0xffffffffU, 0xffffffffU}, {}));
  CHECK_THAT(error_of(p, 3), Contains("promise more than"));
  write_gz(p, idx(0x08, {2, 2, 2}, pixels(7)));
  CHECK_THAT(error_of(p, 3), Contains(where) && Contains("truncated: the header promises 8 data bytes, the file has 7"));
  write_gz(p, idx(0x08, {2, 2, 2}, pixels(9)));
  CHECK_THAT(error_of(p, 3), Contains(where) && Contains("longer than its header says"));

  // Damage the compressed stream itself: a cut-off file, and flipped bits (checked by CRC-32).
  write_gz(p, idx(0x08, {4, 16, 16}, pixels(1024)));
  const bytes good = read_raw(p);
  REQUIRE(data::read_idx(p, 3).values.size() == 1024);
  write_raw(p, bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2)));
  CHECK_THAT(error_of(p, 3), Contains(where) && Contains("corrupt gzip data") && Contains("truncated"));
  write_raw(p, bytes(good.begin(), good.end() - 4));  // only the trailer's length field is missing
  CHECK_THAT(error_of(p, 3), Contains("corrupt gzip data"));
  bytes flipped = good;
  for (std::size_t i = 20; i < 40; ++i) flipped[i] ^= 0x5a;
  write_raw(p, flipped);
  CHECK_THAT(error_of(p, 3), Contains(where) && Contains("corrupt gzip data"));
}

TEST_CASE("load_idx_dataset checks that images and labels agree", "[data][idx]") {
  scratch_dir dir;
  write_gz(dir.path / "i.gz", idx(0x08, {3, 2, 2}, pixels(12)));
  write_gz(dir.path / "l.gz", idx(0x08, {4}, {0, 1, 2, 3}));
  CHECK_THROWS_WITH(data::load_idx_dataset(dir.path / "i.gz", dir.path / "l.gz", 10),
                    Contains("holds 3 images but") && Contains("holds 4 labels"));
  write_gz(dir.path / "l.gz", idx(0x08, {3}, {0, 10, 2}));
  CHECK_THROWS_WITH(data::load_idx_dataset(dir.path / "i.gz", dir.path / "l.gz", 10),
                    Contains("label 10 of item 1 is not below 10"));
}

TEST_CASE("load_fashion_mnist says which Debian package provides the files", "[data][fashion]") {
  scratch_dir dir;
  const auto missing = dir.path / "nowhere";
  CHECK_THROWS_WITH(data::load_fashion_mnist(data::split::test, missing),
                    Contains((missing / "t10k-images-idx3-ubyte.gz").string()) && Contains("no such file") &&
                        Contains("apt-get install dataset-fashion-mnist"));
  // Well-formed files of the wrong size are not Fashion-MNIST either.
  write_gz(dir.path / "t10k-images-idx3-ubyte.gz", idx(0x08, {2, 28, 28}, pixels(2 * 784)));
  write_gz(dir.path / "t10k-labels-idx1-ubyte.gz", idx(0x08, {2}, {3, 4}));
  CHECK_THROWS_WITH(data::load_fashion_mnist(data::split::test, dir.path),
                    Contains("2 images, Fashion-MNIST's t10k split has 10000") && Contains("dataset-fashion-mnist"));
  write_gz(dir.path / "t10k-images-idx3-ubyte.gz", idx(0x08, {2, 28, 27}, pixels(2 * 28 * 27)));
  CHECK_THROWS_WITH(data::load_fashion_mnist(data::split::test, dir.path), Contains("28x27"));
}

TEST_CASE("epoch_order: a seeded permutation, the same everywhere, new each epoch", "[data][batches]") {
  const auto o = data::epoch_order(1000, 42, 0);
  std::vector<std::uint32_t> sorted = o;
  std::sort(sorted.begin(), sorted.end());
  for (std::uint32_t i = 0; i < 1000; ++i) REQUIRE(sorted[i] == i);
  CHECK(o == data::epoch_order(1000, 42, 0));
  CHECK(o != data::epoch_order(1000, 42, 1));
  CHECK(o != data::epoch_order(1000, 43, 0));
  // Pinned: mt19937_64's sequence is fixed by the standard and the shuffle is our own code, so
  // this must not change with the compiler or the standard library. The values come from an
  // independent Python transcription (mt19937_64, splitmix64, Fisher-Yates with rejection).
  CHECK(data::epoch_order(10, 1, 0) == std::vector<std::uint32_t>{4, 6, 8, 9, 3, 5, 7, 2, 0, 1});
}

TEST_CASE("batch_loader: batches cover the set once, short last batch or dropped, normalised", "[data][batches]") {
  data::image_dataset d;
  d.rows = 2;
  d.cols = 3;
  d.classes = 10;
  for (std::size_t i = 0; i < 10; ++i) {
    d.labels.push_back(static_cast<std::uint8_t>(i));
    for (std::size_t p = 0; p < 6; ++p) d.pixels.push_back(static_cast<std::uint8_t>(i * 25 + p));
  }
  data::batch_loader loader(d, {.batch_size = 4, .seed = 9, .norm = {.mean = 0.5f, .std = 0.25f}});
  REQUIRE(loader.batches() == 3);
  nn::tensor x;
  std::vector<std::int32_t> y;
  std::multiset<std::int32_t> seen;
  for (std::size_t b = 0; b < 3; ++b) {
    loader.gather(b, x, y);
    CHECK(x.shape == nn::shape4{b < 2 ? 4u : 2u, 1, 2, 3});
    for (std::size_t i = 0; i < y.size(); ++i) {
      seen.insert(y[i]);
      // The label identifies the image: pixel p of image i is 25 i + p.
      for (std::size_t p = 0; p < 6; ++p)
        CHECK(x.values[i * 6 + p] ==
              Approx((static_cast<float>(y[i] * 25 + static_cast<std::int32_t>(p)) / 255.0f - 0.5f) / 0.25f));
    }
  }
  CHECK(seen == std::multiset<std::int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  std::vector<std::uint32_t> first(loader.indices(0).begin(), loader.indices(0).end());
  loader.start_epoch(1);
  CHECK(std::vector<std::uint32_t>(loader.indices(0).begin(), loader.indices(0).end()) != first);
  CHECK_THROWS_AS(loader.indices(3), std::out_of_range);

  data::batch_loader dropping(d, {.batch_size = 4, .drop_last = true});
  CHECK(dropping.batches() == 2);
  data::batch_loader ordered(d, {.batch_size = 4, .shuffle = false});
  CHECK(std::vector<std::uint32_t>(ordered.indices(1).begin(), ordered.indices(1).end()) ==
        std::vector<std::uint32_t>{4, 5, 6, 7});
}

TEST_CASE("the installed Fashion-MNIST: counts, classes, and the normalisation constants", "[data][fashion]") {
  if (!fs::exists(fs::path(data::fashion_mnist_dir) / "t10k-images-idx3-ubyte.gz")) {
    WARN("dataset-fashion-mnist is not installed: skipped");
    return;
  }
  const data::image_dataset test = data::load_fashion_mnist(data::split::test);
  CHECK(test.size() == 10000);
  std::vector<int> per_class(10, 0);
  for (auto l : test.labels) ++per_class[l];
  CHECK(std::all_of(per_class.begin(), per_class.end(), [](int n) { return n == 1000; }));

  const data::image_dataset train = data::load_fashion_mnist(data::split::train);
  CHECK(train.size() == 60000);
  double sum = 0, squares = 0;
  for (auto p : train.pixels) {
    const double v = p / 255.0;
    sum += v;
    squares += v * v;
  }
  const double n = static_cast<double>(train.pixels.size());
  const double mean = sum / n, stddev = std::sqrt(squares / n - mean * mean);
  INFO("mean " << mean << ", std " << stddev);
  CHECK(mean == Approx(data::fashion_mnist_mean).margin(5e-5));
  CHECK(stddev == Approx(data::fashion_mnist_std).margin(5e-5));
}
