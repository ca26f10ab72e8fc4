#include "data/fashion_mnist.hpp"

#include <string>

#include "data/idx.hpp"

namespace data {

image_dataset load_idx_dataset(const std::filesystem::path& images, const std::filesystem::path& labels,
                               std::size_t classes) {
  idx_array im = read_idx(images, 3);
  idx_array lb = read_idx(labels, 1);
  if (im.dims[0] != lb.dims[0])
    throw idx_error(images.string() + " holds " + std::to_string(im.dims[0]) + " images but " + labels.string() +
                    " holds " + std::to_string(lb.dims[0]) + " labels");
  for (std::size_t i = 0; i < lb.values.size(); ++i)
    if (lb.values[i] >= classes)
      throw idx_error(labels.string() + ": label " + std::to_string(lb.values[i]) + " of item " + std::to_string(i) +
                      " is not below " + std::to_string(classes));
  image_dataset d;
  d.rows = im.dims[1];
  d.cols = im.dims[2];
  d.classes = classes;
  d.pixels = std::move(im.values);
  d.labels = std::move(lb.values);
  return d;
}

image_dataset load_fashion_mnist(split which, const std::filesystem::path& dir) {
  const std::string stem = which == split::train ? "train" : "t10k";
  const std::size_t expected = which == split::train ? 60000 : 10000;
  const auto images = dir / (stem + "-images-idx3-ubyte.gz");
  const auto labels = dir / (stem + "-labels-idx1-ubyte.gz");
  try {
    image_dataset d = load_idx_dataset(images, labels, 10);
    if (d.rows != 28 || d.cols != 28)
      throw idx_error(images.string() + ": images are " + std::to_string(d.rows) + "x" + std::to_string(d.cols) +
                      ", Fashion-MNIST's are 28x28");
    if (d.size() != expected)
      throw idx_error(images.string() + ": " + std::to_string(d.size()) + " images, Fashion-MNIST's " + stem +
                      " split has " + std::to_string(expected));
    return d;
  } catch (const idx_error& e) {
    throw idx_error(std::string(e.what()) +
                    "; Fashion-MNIST comes from the Debian package dataset-fashion-mnist "
                    "(apt-get install dataset-fashion-mnist), which installs it in " +
                    std::string(fashion_mnist_dir));
  }
}

}  // namespace data
