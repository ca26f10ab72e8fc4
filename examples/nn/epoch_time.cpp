// Times fp32 training epochs of the example models on Fashion-MNIST, on the calling thread, and
// prints loss and accuracy: the source of the epoch times in docs/examples.md (not the trainer;
// that is examples/train).
//   nn_epoch_time mlp|cnn [width=1] [epochs=1] [batch=128] [lr=0.05] [steps per epoch=all]
// Prints wall time and the process's CPU time: on a shared machine the CPU time is the
// one-core cost.
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "data/batches.hpp"
#include "nn/gemm.hpp"
#include "nn/loss.hpp"
#include "nn/models.hpp"
#include "nn/schedule.hpp"
#include "nn/sgd.hpp"

namespace {

double accuracy(nn::sequential& net, const data::image_dataset& set, nn::rounding_hooks& hooks) {
  data::batch_loader loader(set, {.batch_size = 500, .shuffle = false});
  nn::tensor x;
  std::vector<std::int32_t> y;
  nn::softmax_cross_entropy loss;
  std::size_t correct = 0;
  for (std::size_t b = 0; b < loader.batches(); ++b) {
    loader.gather(b, x, y);
    (void)loss.forward(net.forward(x, hooks, nn::mode::eval), y);
    correct += loss.correct();
  }
  return static_cast<double>(correct) / static_cast<double>(set.size());
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string which = argc > 1 ? argv[1] : "mlp";
  const double width = argc > 2 ? std::atof(argv[2]) : 1.0;
  const std::size_t epochs = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 1;
  const std::size_t batch = argc > 4 ? std::strtoul(argv[4], nullptr, 10) : 128;
  const double lr = argc > 5 ? std::atof(argv[5]) : 0.05;
  const std::size_t limit = argc > 6 ? std::strtoul(argv[6], nullptr, 10) : 0;
  if (which != "mlp" && which != "cnn") throw std::invalid_argument("model must be mlp or cnn");

  const auto t_load = std::chrono::steady_clock::now();
  const data::image_dataset train = data::load_fashion_mnist(data::split::train);
  const data::image_dataset test = data::load_fashion_mnist(data::split::test);
  std::printf("loaded Fashion-MNIST in %.2f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count());

  nn::sequential net = which == "mlp" ? nn::make_mlp({.width = width}) : nn::make_cnn({.width = width});
  std::printf("%s width %g: %zu parameters, GEMM backend %s\n%s", which.c_str(), width, net.parameter_count(),
              std::string(nn::name(nn::default_gemm_backend())).c_str(), net.describe(batch).table().c_str());
  nn::no_rounding fp32;
  nn::sgd opt({.momentum = 0.9f, .weight_decay = 5e-4f});
  data::batch_loader loader(train, {.batch_size = batch, .seed = 1});
  const nn::cosine_schedule schedule{.base_lr = lr, .total = epochs * loader.batches()};
  nn::softmax_cross_entropy loss;
  nn::tensor x;
  std::vector<std::int32_t> y;
  const auto params = net.parameters();
  std::size_t step = 0;
  for (std::size_t e = 0; e < epochs; ++e) {
    loader.start_epoch(e);
    double sum = 0.0;
    std::size_t correct = 0;
    const auto t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    const std::size_t steps = limit > 0 && limit < loader.batches() ? limit : loader.batches();
    for (std::size_t b = 0; b < steps; ++b, ++step) {
      loader.gather(b, x, y);
      sum += loss.forward(net.forward(x, fp32, nn::mode::train), y) * static_cast<double>(y.size());
      correct += loss.correct();
      net.backward(loss.backward(), fp32);
      opt.step(params, static_cast<float>(schedule(step)));
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    std::printf("epoch %zu (%zu steps): %.2f s wall, %.2f s CPU  train loss %.4f  train acc %.4f  test acc %.4f\n", e + 1, steps, seconds, cpu,
                sum / static_cast<double>(train.size()), static_cast<double>(correct) / static_cast<double>(train.size()),
                accuracy(net, test, fp32));
  }
} catch (const std::exception& e) {
  std::fprintf(stderr, "nn_epoch_time: %s\n", e.what());
  return 1;
}
