"""minifloat.training on ResNet-18 (examples/torch/models.py, torchvision's structure and names): the C++ graph and Algorithm 1's groups from
torch.fx, checked against groups worked out by hand (the sizes below were computed on paper from
the layer shapes, not by the code under test)."""

import os
import sys

import pytest
import torch

import minifloat.training as mt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "torch"))
import models  # noqa: E402  (examples/torch/models.py: ResNet-18 with torchvision's module names)


@pytest.fixture(scope="module")
def resnet18():
    torch.manual_seed(0)
    model = models.ResNet18(num_classes=10)
    return mt.instrument(model, torch.randn(2, 3, 32, 32))


def group_named(pm, name):
    found = [g for g in pm.groups() if g.name == name]
    assert len(found) == 1, name
    return found[0]


def test_every_operation_gets_y_and_gy_sites_and_every_parameter_p_and_gp(resnet18):
    sites = resnet18.sites()
    roles = [s.role for s in sites]
    params = dict(torch.nn.Module.named_parameters(resnet18.traced.graph_module))
    # ResNet-18: 20 convolutions + 1 linear + 20 batch norms (2 tensors each), 62 parameter tensors.
    assert roles.count("P") == roles.count("GP") == 62 == len(params)
    # Operations: input, stem (conv, bn, relu, maxpool), 8 blocks of (conv, bn, relu, conv, bn, add,
    # relu), 3 shortcuts of (conv, bn), avgpool, fc = 1 + 4 + 56 + 6 + 2 = 69; the input has no GY.
    assert roles.count("Y") == 69
    assert roles.count("GY") == 68
    assert resnet18.site(resnet18.find("layer1.0.conv1.weight")).numel == 64 * 64 * 9


def test_identity_shortcut_block_groups_match_the_hand_worked_ones(resnet18):
    # layer1.0 on a 2x3x32x32 input: every map is 2 x 64 x 8 x 8 = 8192 elements.
    g = group_named(resnet18, "layer1.0.conv1")
    assert g.operations == ("layer1.0.conv1", "layer1.0.bn1", "layer1_0_relu")
    assert g.sites == ("layer1.0.conv1.Y", "layer1.0.conv1.GY", "layer1.0.bn1.Y", "layer1.0.bn1.GY",
                       "layer1_0_relu.Y", "layer1_0_relu.GY",
                       "layer1.0.bn1.weight", "layer1.0.bn1.weight.grad", "layer1.0.bn1.bias",
                       "layer1.0.bn1.bias.grad", "layer1.0.conv2.weight", "layer1.0.conv2.weight.grad")
    assert g.size == 6 * 8192 + 4 * 64 + 2 * 36864  # = 123136
    # The residual addition runs after bn2, so it (and the ReLU after it) joins conv2's group.
    g = group_named(resnet18, "layer1.0.conv2")
    assert g.operations == ("layer1.0.conv2", "layer1.0.bn2", "add", "layer1_0_relu_1")
    assert g.sites == ("layer1.0.conv2.Y", "layer1.0.conv2.GY", "layer1.0.bn2.Y", "layer1.0.bn2.GY",
                       "add.Y", "add.GY", "layer1_0_relu_1.Y", "layer1_0_relu_1.GY",
                       "layer1.0.bn2.weight", "layer1.0.bn2.weight.grad", "layer1.0.bn2.bias",
                       "layer1.0.bn2.bias.grad", "layer1.1.conv1.weight", "layer1.1.conv1.weight.grad")
    assert g.size == 8 * 8192 + 4 * 64 + 2 * 36864  # = 139520


def test_downsampling_block_groups_match_the_hand_worked_ones(resnet18):
    # layer2.0: maps of 2 x 128 x 4 x 4 = 4096 elements. Its input (layer1.1's last ReLU, 8192
    # elements) feeds both conv1 and the 1x1 shortcut, so both GEMMs' weights join that group.
    g = group_named(resnet18, "layer1.1.conv2")
    assert g.sites[-4:] == ("layer2.0.conv1.weight", "layer2.0.conv1.weight.grad",
                            "layer2.0.downsample.0.weight", "layer2.0.downsample.0.weight.grad")
    assert g.size == 8 * 8192 + 4 * 64 + 2 * 128 * 64 * 9 + 2 * 128 * 64  # = 229632
    g = group_named(resnet18, "layer2.0.conv2")  # bn2 only: the shortcut GEMM executes next
    assert g.operations == ("layer2.0.conv2", "layer2.0.bn2")
    assert g.size == 4 * 4096 + 4 * 128  # = 16896
    # The shortcut conv is the last GEMM before the merge, so the add and the ReLU join its group;
    # its batch norm's parameters and the next block's conv1 weights come with them.
    g = group_named(resnet18, "layer2.0.downsample.0")
    assert g.operations == ("layer2.0.downsample.0", "layer2.0.downsample.1", "add_2", "layer2_0_relu_1")
    assert g.sites == ("layer2.0.downsample.0.Y", "layer2.0.downsample.0.GY", "layer2.0.downsample.1.Y",
                       "layer2.0.downsample.1.GY", "add_2.Y", "add_2.GY", "layer2_0_relu_1.Y",
                       "layer2_0_relu_1.GY", "layer2.0.downsample.1.weight", "layer2.0.downsample.1.weight.grad",
                       "layer2.0.downsample.1.bias", "layer2.0.downsample.1.bias.grad",
                       "layer2.1.conv1.weight", "layer2.1.conv1.weight.grad")
    assert g.size == 8 * 4096 + 4 * 128 + 2 * 128 * 128 * 9  # = 328192


def test_groups_partition_the_sites_and_start_at_the_input_and_every_gemm(resnet18):
    groups = resnet18.groups()
    names = [s for g in groups for s in g.sites]
    assert sorted(names) == sorted(s.name for s in resnet18.sites())
    assert len(groups) == 1 + 21  # the input, 20 convolutions, the linear layer
    assert sum(g.size for g in groups) == sum(s.numel for s in resnet18.sites())


def test_instrumented_model_computes_what_the_model_computes_when_rounding_is_off():
    torch.manual_seed(1)
    model = models.ResNet18(num_classes=10).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        expected = model(x)
    pm = mt.instrument(model, x)
    pm.assign("fp32")
    pm.module.eval()
    with torch.no_grad():
        assert torch.equal(pm(x), expected)


class TwoBranches(torch.nn.Module):
    """Two 1x1 convolutions on the input, concatenated, ReLU, flatten, linear."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(1, 2, 1, bias=False)
        self.b = torch.nn.Conv2d(1, 3, 1, bias=False)
        self.relu = torch.nn.ReLU()
        self.fc = torch.nn.Linear(5 * 4 * 4, 2)

    def forward(self, x):
        y = torch.cat([self.a(x), self.b(x)], dim=1)
        return self.fc(torch.flatten(self.relu(y), 1))


def test_a_concatenation_joins_the_group_of_the_last_gemm_before_it():
    pm = mt.instrument(TwoBranches(), torch.zeros(1, 1, 4, 4))
    groups = [(g.name, g.operations, g.size) for g in pm.groups()]
    # Worked by hand: input 16 elements; a's output 2x4x4 = 32, b's 48, cat and ReLU 80, fc 2.
    # Both convolutions read the input, so their weights (2 and 3) join the input's group; the
    # flatten is an alias of the ReLU's output, so fc's weights (160) and bias (2) join b's group.
    assert groups == [
        ("input", ("input",), 16 + 2 * 2 + 2 * 3),
        ("a", ("a",), 2 * 32),
        ("b", ("b", "cat", "relu"), 2 * 48 + 2 * 80 + 2 * 80 + 2 * 160 + 2 * 2),
        ("fc", ("fc",), 2 * 2),
    ]
    out = pm(torch.randn(1, 1, 4, 4))  # and the instrumented model runs, merge included
    assert out.shape == (1, 2)
