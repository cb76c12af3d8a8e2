"""EngineConfig: paged-KV arithmetic and validation, by hand."""

from __future__ import annotations

import pytest

from schedlab.errors import SchedlabError
from schedlab.llm.models import ILLUSTRATIVE_KV_TOKENS
from schedlab.serving.engine_config import BLOCK_SIZES, EngineConfig

CONFIG = EngineConfig(kv_tokens=1000, block_size=16)


def test_blocks():
    assert CONFIG.total_blocks == 62  # floor(1000 / 16)
    assert [CONFIG.blocks(t) for t in (0, 1, 16, 17, 32)] == [0, 1, 1, 2, 2]


def test_vllm_behaviours_are_on_by_default_but_async_scheduling():
    assert CONFIG.prefix_caching and CONFIG.reserve_full_prompt
    assert not CONFIG.async_scheduling


@pytest.mark.parametrize("field", ["prefix_caching", "reserve_full_prompt", "async_scheduling"])
def test_behaviours_must_be_booleans(field):
    with pytest.raises(SchedlabError, match=f"engine.{field}: must be true or false"):
        EngineConfig(**{field: 1})


@pytest.mark.parametrize("size", [2, 7, 12, 512])
def test_block_size_is_one_vllm_takes(size):
    with pytest.raises(SchedlabError, match=f"engine.block_size: vLLM takes .* got {size}"):
        EngineConfig(block_size=size)


def test_every_vllm_block_size_is_accepted():
    assert [EngineConfig(block_size=b).block_size for b in BLOCK_SIZES] == list(BLOCK_SIZES)


def test_the_default_kv_budget_is_the_illustrative_models():
    # 32 GiB of KV at Llama-3.1-8B's 128 KiB a token
    assert EngineConfig().kv_tokens == ILLUSTRATIVE_KV_TOKENS == 32 * 2**30 // 131_072
