"""The LLM optimizer: prompts, response cleaning, retries and error mapping, the two clients.

Nothing here reaches a real LLM: the optimizer runs on ScriptedChatModel, and the NIM
(ChatNVIDIA) and OpenAI-compatible (ChatOpenAI) clients talk to a fake server on 127.0.0.1.
Backoffs are tiny (or recorded instead of slept) so the file runs in seconds.
"""

from __future__ import annotations

import re
import shutil

import pytest
from pydantic import SecretStr

from kernelloop.config import OptimizeSettings
from kernelloop.errors import ConfigError, EnvironmentProblem
from kernelloop.llm_config import DEFAULT_BASE_URL, LLMConfig
from kernelloop.optimizers.base import (
    FailedAttempt,
    InvalidResponse,
    Optimizer,
    OptimizeRequest,
    PastAttempt,
    ResearchNote,
)
from kernelloop.optimizers.cleaning import (
    clean_response,
    extract_approach,
    parse_signature,
    required_exports,
    to_ascii,
)
from kernelloop.optimizers.llm import (
    MISSING_KEY_MESSAGE,
    LLMOptimizer,
    LLMUnavailable,
    classify_failure,
    make_nim_optimizer,
    make_openai_optimizer,
)
from kernelloop.optimizers.prompting import (
    PROMPT_BUDGET_CHARS,
    PROMPT_FILES,
    PROMPTS_DIR,
    build_messages,
    render,
    template_slots,
)
from kernelloop.profiler.diagnosis import Diagnosis, Evidence, Finding, Roofline
from kernelloop.program.split import split_program

from .conftest import ROOT
from .fakes import FakeOpenAIServer, Reply, ScriptedChatModel, chat_completion
from .fakes.openai_server import fake_openai_server  # noqa: F401  (pytest fixture)

KEY = "nvapi-TEST-0123456789abcdefghijklmnop"
TILED = (ROOT / "src" / "kernelloop" / "exemplars" / "matmul_smem_tiling.cu").read_text()
TILED_CODE = TILED[TILED.index("static const int kTile") :]  # the exemplar without its header comment
FAST = OptimizeSettings(llm_retries=2, llm_backoff_s=0.001, llm_backoff_max_s=0.005, llm_timeout_s=5)


def request_for(kernel: str = "naive_matmul", **changes) -> OptimizeRequest:
    path = ROOT / "kernels" / f"{kernel}.cu"
    text = path.read_text()
    split = split_program(text, kernel)
    fields = dict(kernel_name=kernel, program=text, baseline_editable=split.editable,
                  current_editable=split.editable, preamble=split.preamble, harness=split.harness,
                  exported=split.exported, gpu_name="NVIDIA H100 80GB HBM3", arch="sm_90")
    fields.update(changes)
    return OptimizeRequest(**fields)


def answer(code: str = TILED_CODE, approach: str = "32x32 shared-memory tiles") -> str:
    return f"Approach: {approach}\n\n```cuda\n{code}```\n\nEach tile is loaded once per block."


def diagnosis(findings: int = 2) -> Diagnosis:
    return Diagnosis(
        kernel="naive_matmul_kernel", device="NVIDIA H100 80GB HBM3", duration_ms=0.416, grid=(64, 64, 1),
        block=(16, 16, 1), primary="memory-bound", subtype="L1/LSU-limited",
        summary="memory-bound - L1/LSU-limited: SM 40%, memory 97% (L1 97%, L2 20%, DRAM 0.4%). Fix: shared-memory tiling.",
        key_metrics=[Evidence(key="l1tex_throughput_pct", label="L1/TEX throughput", value=97.2, unit="%"),
                     Evidence(key="registers_per_thread", label="registers per thread", value=40.0, unit=""),
                     Evidence(key="dram_throughput_pct", label="DRAM throughput", value=None, unit="%")],
        findings=[Finding(rule=f"rule-{k}", severity="major", title=f"Finding number {k}",
                          finding=f"every thread re-reads a row of A ({k})", action="tile A and B in shared memory",
                          note="", evidence=[], nvidia_agrees=["MemoryCacheAccessPattern"]) for k in range(findings)],
        nvidia=[],
        roofline=Roofline(fp32_flops_per_s=5e12, dram_bytes_per_s=1e10, arithmetic_intensity=500.0,
                          peak_fp32_flops_per_s=6e13, peak_dram_bytes_per_s=3.3e12, ridge_point=18.2,
                          pct_of_compute_roof=8.3, pct_of_memory_roof=0.3, side="compute"),
        metrics_parsed=2500,
    )


def text_of(messages) -> str:
    return "\n".join(m.content for m in messages)


def one_line(message: str) -> bool:
    return "\n" not in message and message.strip() == message and len(message) > 0


# -- prompts -------------------------------------------------------------------------------


def test_system_prompt_states_the_rules():
    system = build_messages(request_for())[0]
    assert system.role == "system"
    for rule in ("cuBLAS", "cuDNN", "thrust", "CUTLASS", "cub::Device", "Inline PTX", ".incbin",
                 "exactly its name, return type and parameter types", "printing", "environment variables",
                 "3e-5 for fp32", "only its own local variables", "exactly ONE ```cuda code block", "COMPLETE editable part", "ASCII characters only",
                 "rest unchanged", "Approach:"):
        assert rule in system.content, rule


def test_user_prompt_holds_the_task():
    notes = [ResearchNote(title="Shared-memory tiling", source="notes/smem-tiling.md",
                          text="Load a tile of A and B into shared memory once per block.", score=3.2)]
    memory = [PastAttempt(run_id="20260101-120000", approach="16x16 tiles", accepted=False,
                          reason="not faster: 1.05x", speedup=1.05)]
    messages = build_messages(request_for(diagnosis=diagnosis(), research=notes, memory=memory, iteration=2))
    assert [m.role for m in messages] == ["system", "user"]
    user = messages[1].content
    assert "`naive_matmul`" in user and "NVIDIA H100 80GB HBM3 (sm_90)" in user and "Round 2" in user
    # the launcher the harness calls, not the kernel it may rename
    assert "- `void launch_matmul(const float* A, const float* B, float* C, int n);`" in user
    assert "- `__global__ void naive_matmul_kernel" not in user
    assert "naive_matmul_kernel<<<grid, block>>>(A, B, C, n);" in user  # the current editable part
    # harness excerpt: the v2 harness's call of the launcher, in the lambda it hands to h.run
    assert "h.run([&] { launch_matmul(A, B, C, n); }" in user and "h.fetch(C)" in user
    assert "static const int N = 1024;" in user  # preamble
    assert "tiled_matmul_kernel" in user  # the canonical exemplar
    assert "L1/LSU-limited" in user and "L1/TEX throughput 97.2%" in user and "tile A and B in shared memory" in user
    assert "Roofline: 500 FP32 FLOP per DRAM byte" in user
    assert "### Shared-memory tiling (notes/smem-tiling.md)" in user and "once per block" in user
    assert "16x16 tiles -> rejected, 1.05x: not faster" in user
    assert "did not clear the bar" not in user and "does not compile" not in user
    assert text_of(messages).isascii()  # the preamble's em dash is spelled "--"


def test_user_prompt_without_profile_notes_or_memory_says_so():
    user = build_messages(request_for())[1].content
    assert "No profile is available" in user and "No notes were found" in user and "No earlier runs" in user
    assert "The code below is the baseline." in user


def test_best_so_far_is_labelled():
    user = build_messages(request_for(current_editable=TILED_CODE, best_speedup=1.74))[1].content
    assert "best accepted candidate so far (1.74x over the baseline)" in user
    assert "tiled_matmul_kernel<<<grid, block>>>" in user


def test_anti_context_lists_every_failed_attempt():
    attempts = [
        FailedAttempt(iteration=1, approach="register blocking 8x8", kind="compile",
                      reason="nvcc failed: 2 errors", excerpt='candidate.cu(12): error: identifier "sA" is undefined'),
        FailedAttempt(iteration=2, approach="float4 loads", kind="correctness", reason="outputs differ from the baseline",
                      excerpt="checksum: candidate 261888.5 vs baseline 262144.0 (rel 9.8e-04)"),
        FailedAttempt(iteration=3, approach="16x16 tiles", kind="not_faster", reason="1.05x is below the 1.2x bar",
                      excerpt="median 0.396 ms vs 0.416 ms", speedup=1.05, source="__global__ void k16() {}\n"),
    ]
    user = build_messages(request_for(failed_attempts=attempts, iteration=4))[1].content
    assert "Your previous attempt did not clear the bar; try a different approach" in user
    for a in attempts:
        assert a.approach in user and a.excerpt in user
    assert "did not compile" in user and "wrong results" in user and "correct, but not fast enough" in user
    assert "Measured speedup over the baseline: 1.05x." in user
    assert "Start of that candidate" in user and "k16()" in user  # the latest attempt's source
    assert user.index("register blocking 8x8") < user.index("float4 loads") < user.index("16x16 tiles")


def test_compile_fix_section_carries_errors_and_the_candidate():
    broken = TILED_CODE.replace("sA[ty][k]", "sAA[ty][k]")
    errors = 'candidate.cu(15): error: identifier "sAA" is undefined\n1 error detected'
    user = build_messages(request_for(compile_errors=errors, previous_source=broken))[1].content
    assert "## Fix the compile errors of your candidate" in user
    assert 'identifier "sAA" is undefined' in user and "acc += sAA[ty][k]" in user
    assert user.index("## Your answer") < user.index("## Fix the compile errors")


def test_prompts_are_deterministic():
    req = request_for(diagnosis=diagnosis(), failed_attempts=[FailedAttempt(iteration=1, approach="a", kind="other",
                                                                             reason="r")])
    assert build_messages(req) == build_messages(req)


def _worst_case(kernel: str) -> OptimizeRequest:
    big_source = (ROOT / "src" / "kernelloop" / "exemplars" / "matmul_register_blocking.cu").read_text()
    return request_for(
        kernel,
        diagnosis=diagnosis(findings=9),
        research=[ResearchNote(title=f"note {k}", source=f"notes/n{k}.md", text=("tiling advice line\n" * 400))
                  for k in range(20)],
        failed_attempts=[FailedAttempt(iteration=k, approach=f"attempt {k} " + "x" * 300, kind="compile",
                                       reason="nvcc failed " * 60, excerpt="error: something went wrong\n" * 300,
                                       source=big_source) for k in range(1, 13)],
        memory=[PastAttempt(run_id=f"run{k}", approach="tiles " * 30, accepted=k % 2 == 0, reason="slow " * 40,
                            speedup=1.1) for k in range(30)],
        compile_errors="candidate.cu(1): error: expected a declaration\n" * 500,
        previous_source=big_source,
        iteration=13,
    )


@pytest.mark.parametrize("kernel", sorted(p.stem for p in (ROOT / "kernels").glob("*.cu")))
def test_prompt_stays_within_budget_for_every_bundled_kernel(kernel):
    req = _worst_case(kernel)
    messages = build_messages(req)
    total = sum(len(m.content) for m in messages)
    assert total <= PROMPT_BUDGET_CHARS, total
    user = messages[1].content
    assert "[kernelloop:" in user  # what was cut says so
    assert req.current_editable.strip() in user  # the code to improve is never cut for a bundled kernel
    assert "error: expected a declaration" in user and "did not clear the bar" in user
    assert "attempt 12" in user  # the most recent attempt survives the cuts
    assert text_of(messages).isascii()
    # an ordinary first-round prompt keeps everything, exemplar included
    plain = build_messages(request_for(kernel, diagnosis=diagnosis(), research=req.research[:4]))
    assert "tiled_matmul_kernel" in plain[1].content and sum(len(m.content) for m in plain) <= PROMPT_BUDGET_CHARS


def test_every_slot_is_filled_and_documented():
    readme = (PROMPTS_DIR / "README.md").read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+\.md)` \|.*$", readme, re.M)}
    assert set(rows) == set(PROMPT_FILES)
    for name in PROMPT_FILES:
        text = (PROMPTS_DIR / name).read_text()
        assert text.isascii(), name
        for slot in template_slots(text):
            assert f"`{{{slot}}}`" in rows[name], f"{name}: slot {slot} not documented in prompts/README.md"
    # a full request fills every slot of every file (render raises on an unfilled one)
    full = build_messages(_worst_case("naive_matmul"))
    assert not re.search(r"\{[a-z_]+\}", text_of(full))


def test_render_rejects_unknown_slots_and_keeps_literal_braces():
    assert render("a {x} {{b}}", {"x": "{y}"}) == "a {y} {b}"  # inserted text is not scanned again
    with pytest.raises(ConfigError, match=r"prompts/user.md: unknown slot \{gpu_model\}"):
        render("GPU {gpu_model}", {"gpu": "H100"}, "prompts/user.md")


def test_prompts_dir_can_be_overridden(tmp_path):
    custom = tmp_path / "prompts"
    shutil.copytree(PROMPTS_DIR, custom)
    (custom / "system.md").write_text("Custom rules for {{everything}}.\n")
    messages = build_messages(request_for(), custom)
    assert messages[0].content == "Custom rules for {everything}.\n"
    (custom / "attempt.md").unlink()
    with pytest.raises(ConfigError, match="attempt.md cannot be read"):
        build_messages(request_for(), custom)


# -- cleaning ------------------------------------------------------------------------------


def test_clean_takes_the_code_block_and_drops_prose():
    source, notes = clean_response(answer(), request_for())
    assert source == TILED_CODE
    assert any("prose" in n for n in notes)
    assert extract_approach(answer()) == "32x32 shared-memory tiles"


@pytest.mark.parametrize("text, label", [
    ("Approach: register blocking 64x64, 4x4 per thread\n```cuda\nx\n```", "register blocking 64x64, 4x4 per thread"),
    ("**Approach:** warp-shuffle reduction\n", "warp-shuffle reduction"),
    ("## Approach - padded \u00d7 tiles\n", "padded x tiles"),
    ("```cuda\n// Approach: inside the code\n```\nno label here", None),
    ("Just code.", None),
])
def test_extract_approach(text, label):
    assert extract_approach(text) == label


@pytest.mark.parametrize("fence", ["```cuda", "```cpp", "```c++", "```", "~~~cuda", "```CUDA"])
def test_clean_accepts_the_usual_fences(fence):
    close = "~~~" if fence.startswith("~") else "```"
    source, _ = clean_response(f"Here it is:\n{fence}\n{TILED_CODE}{close}\n", request_for())
    assert source == TILED_CODE


def test_clean_strips_reasoning_including_drafts_inside_it():
    draft = "```cuda\nvoid launch_matmul(const float* A, const float* B, float* C, int n) {}\n// a long draft\n" * 3 + "```"
    text = f"<think>Let me try tiles.\n{draft}\nThat is wrong.</think>\n{answer()}"
    source, notes = clean_response(text, request_for())
    assert source == TILED_CODE and any("reasoning" in n for n in notes)
    # some reasoning models omit the opening tag
    source, _ = clean_response(f"I think tiles work.\n{draft}\n</think>\n{answer()}", request_for())
    assert source == TILED_CODE
    assert extract_approach(f"<think>Approach: wrong</think>\n{answer()}") == "32x32 shared-memory tiles"


def test_clean_takes_the_largest_block_that_defines_the_launcher():
    snippet = "```cuda\n__shared__ float sA[32][32];\n```\n"
    kernel_only = "```cuda\n" + TILED_CODE.split("void launch_matmul")[0] + "```\n"
    text = f"Approach: tiles\nThe key line:\n{snippet}Full code:\n```cuda\n{TILED_CODE}```\nKernel again:\n{kernel_only}"
    source, notes = clean_response(text, request_for())
    assert source == TILED_CODE
    assert any("3 code blocks" in n and "launch_matmul" in n for n in notes)


def test_clean_keeps_the_editable_part_of_a_whole_program():
    program = (ROOT / "kernels" / "naive_matmul.cu").read_text()
    whole = program.replace(split_program(program).editable, TILED_CODE)
    source, notes = clean_response(f"```cuda\n{whole}```", request_for())
    assert source.strip() == TILED_CODE.strip() and any("markers" in n for n in notes)


def test_clean_accepts_unfenced_code():
    source, notes = clean_response(TILED_CODE, request_for())
    assert source == TILED_CODE and any("no code fence" in n for n in notes)


@pytest.mark.parametrize("elided, line", [
    ("__global__ void tiled_matmul_kernel(const float* A, const float* B, float* C, int n) {\n  // ... rest unchanged\n}\n", 3),
    ("// ...\n", 2),
    ("  // rest of the kernel unchanged\n", 2),
    ("/* same as before */\n", 2),
    ("// existing code\n", 2),
    ("// helper kernels omitted for brevity\n", 2),
    ("// launcher unchanged\n", 2),
    ("__device__ float helper(float x) { ... }\n", 2),
    ("  ...\n", 2),
    ("// \u2026 other kernels\n", 2),
])
def test_clean_rejects_elisions(elided, line):
    code = TILED_CODE.replace("static const int kTile = 32;\n", "static const int kTile = 32;\n" + elided)
    with pytest.raises(InvalidResponse, match="elided") as err:
        clean_response(answer(code), request_for())
    assert one_line(str(err.value)) and f"on line {line})" in str(err.value)


@pytest.mark.parametrize("legal", [
    "template <typename... Ts> __device__ int count(Ts... xs) { return sizeof...(Ts); }\n",
    "// sum over k = 0 ... n-1 of A[row][k] * B[k][col]\n",
    "// The rest of the loop reads only shared memory, so global traffic drops by a factor of 32.\n",
    "// Keep the output layout unchanged so the harness reads C exactly as it did with the baseline kernel.\n",
    "static const char* kName = \"tiled ... kernel\";\n",
    "// (Writing past the end of C itself, C[n*n + ...], is not a silent bug here.)\n",
    "// memcheck: \"Invalid __global__ write ... by thread (0,0,0) in block (63,63,0) ... out of bounds\"\n",
])
def test_clean_has_no_false_elisions(legal):
    code = TILED_CODE.replace("static const int kTile = 32;\n", "static const int kTile = 32;\n" + legal)
    source, _ = clean_response(answer(code), request_for())
    assert legal.strip() in source


BASELINE_OF = {"matmul": "naive_matmul", "softmax": "row_softmax", "reduction": "sum_reduction",
               "transpose": "transpose", "stencil": "stencil2d", "histogram": "histogram"}


@pytest.mark.parametrize("path", sorted((ROOT / "src" / "kernelloop" / "exemplars").glob("*.cu")) +
                         sorted((ROOT / "tests" / "fixtures" / "candidates" / "matmul").glob("*.cu")),
                         ids=lambda p: p.name)
def test_clean_passes_real_candidates(path):
    """Every bundled exemplar and adversarial matmul candidate gets through cleaning unchanged
    (the verifier, not the cleaner, judges them), except the one with a changed signature."""
    baseline = BASELINE_OF[path.stem.split("_")[0]] if path.parent.name == "exemplars" else "naive_matmul"
    text = path.read_text()
    if path.name == "wrong_signature.cu":
        with pytest.raises(InvalidResponse, match="signature of launch_matmul changed"):
            clean_response(f"```cuda\n{text}```", request_for(baseline))
        return
    source, _ = clean_response(f"Approach: x\n```cuda\n{text}```", request_for(baseline))
    assert source == to_ascii(text).strip("\n") + "\n"  # only comments' typography was touched


def test_clean_spells_comment_unicode_and_rejects_it_in_code():
    code = TILED_CODE.replace("static const int kTile = 32;", "static const int kTile = 32;  // 32\u00d732 tile \u2014 fits")
    source, notes = clean_response(answer(code), request_for())
    assert "// 32x32 tile -- fits" in source and source.isascii() and any("non-ASCII" in n for n in notes)
    with pytest.raises(InvalidResponse, match=r"U\+00D7 \(MULTIPLICATION SIGN\) on line 1"):
        clean_response(answer(code), request_for(), fix_comment_unicode=False)
    in_code = TILED_CODE.replace("float acc = 0.0f;", "float acc = 0.0f;\u00a0")
    with pytest.raises(InvalidResponse, match=r"non-ASCII character U\+00A0 \(NO-BREAK SPACE\) on line 9") as err:
        clean_response(answer(in_code), request_for())
    assert one_line(str(err.value))


def test_clean_rejects_a_missing_launcher():
    code = TILED_CODE.split("void launch_matmul")[0]
    with pytest.raises(InvalidResponse, match="does not define launch_matmul") as err:
        clean_response(answer(code), request_for())
    assert "void launch_matmul(const float* A, const float* B, float* C, int n);" in str(err.value)
    assert one_line(str(err.value))


@pytest.mark.parametrize("changed, expect", [
    ("void launch_matmul(const float* A, const float* B, float* C, int n, int m)", "int, int)"),
    ("void launch_matmul(float* A, const float* B, float* C, int n)", "(float*, const float*"),
    ("int launch_matmul(const float* A, const float* B, float* C, int n)", "`int launch_matmul("),
    ("static void launch_matmul(const float* A, const float* B, float* C, int n)", "must not be static"),
])
def test_clean_rejects_a_changed_launcher(changed, expect):
    code = TILED_CODE.replace("void launch_matmul(const float* A, const float* B, float* C, int n)", changed)
    with pytest.raises(InvalidResponse) as err:
        clean_response(answer(code), request_for())
    assert expect in str(err.value) and one_line(str(err.value))
    if "static" not in changed:
        assert "the harness calls `void launch_matmul(const float*, const float*, float*, int)`" in str(err.value)


@pytest.mark.parametrize("same", [
    "void launch_matmul(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, const int size)",
    "void launch_matmul(float const *A, float const *B, float *C, int)",
    "__host__ inline void launch_matmul(const float A[], const float* const B, float* C, int n)",
])
def test_clean_accepts_the_same_signature_spelled_differently(same):
    code = TILED_CODE.replace("void launch_matmul(const float* A, const float* B, float* C, int n)", same)
    code = code.replace("__global__ void tiled", "__global__ void __launch_bounds__(1024) tiled")
    source, _ = clean_response(answer(code), request_for())
    assert same in source


def test_only_functions_the_harness_calls_are_required():
    req = request_for()
    assert [parse_signature(d).name for d in required_exports(req)] == ["launch_matmul"]
    assert [parse_signature(d).name for d in required_exports(req.model_copy(update={"harness": ""}))] == ["launch_matmul"]
    # the harness of a marker-less program launches the kernel itself: then the kernel is required
    req2 = req.model_copy(update={"harness": "int main() { naive_matmul_kernel<<<1, 1>>>(0, 0, 0, 0); }"})
    assert [parse_signature(d).name for d in required_exports(req2)] == ["naive_matmul_kernel"]


@pytest.mark.parametrize("text, expect", [
    ("", "the answer is empty"),
    ("   \n", "the answer is empty"),
    ("<think>tiles, then maybe register blocking and", "unclosed <think>"),
    ("<think>all reasoning</think>\n", "only reasoning"),
    ("I would tile the matrices in shared memory.", "no ```cuda code block"),
    ("Approach: x\n```python\nprint(1)\n```", "only python blocks"),
    ("Approach: x\n```diff\n-  dim3 block(16, 16);\n+  dim3 block(32, 32);\n```", "is a diff"),
    ("Approach: x\n```cuda\n\n```", "code block is empty"),
    ("Approach: x\n```cuda\n" + TILED_CODE[:300], "cut off"),
])
def test_clean_rejects_unusable_answers_in_one_line(text, expect):
    with pytest.raises(InvalidResponse) as err:
        clean_response(text, request_for())
    assert expect in str(err.value) and one_line(str(err.value))


# -- LLMOptimizer on a scripted chat model -------------------------------------------------


def scripted_optimizer(model: ScriptedChatModel, settings: OptimizeSettings = FAST, **kw) -> LLMOptimizer:
    return LLMOptimizer(lambda: model, name="nim", model="meta/llama-3.3-70b-instruct", settings=settings, **kw)


def test_proposal_fields_from_a_scripted_model():
    chat = ScriptedChatModel([answer()], prompt_tokens=1234, completion_tokens=321)
    optimizer = scripted_optimizer(chat)
    assert isinstance(optimizer, Optimizer)
    req = request_for(diagnosis=diagnosis())
    proposal = optimizer.propose(req)
    assert proposal.source == TILED_CODE and proposal.approach == "32x32 shared-memory tiles"
    assert proposal.optimizer == "nim" and proposal.model == "scripted-model"
    assert proposal.response == answer() and proposal.prompt == build_messages(req)
    assert (proposal.tokens.prompt_tokens, proposal.tokens.completion_tokens, proposal.tokens.total_tokens) == (1234, 321, 1555)
    assert proposal.thinking_s >= 0
    sent = chat.calls[0]
    assert [m.type for m in sent] == ["system", "human"] and sent[1].content == proposal.prompt[1].content


def test_chat_model_is_made_at_the_first_request_and_once():
    made = []
    chat = ScriptedChatModel([answer(), answer()])

    def factory():
        made.append(1)
        return chat

    optimizer = LLMOptimizer(factory, name="openai", model="m", settings=FAST)
    assert made == []
    optimizer.propose(request_for())
    optimizer.propose(request_for())
    assert made == [1] and len(chat.calls) == 2


def test_client_warnings_become_notes_not_output():
    import warnings

    chat = ScriptedChatModel([answer()])

    def factory():
        warnings.warn(f"Model m is deprecated; key {KEY} used", UserWarning)
        return chat

    optimizer = LLMOptimizer(factory, name="nim", model="m", settings=FAST, api_key=SecretStr(KEY))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        proposal = optimizer.propose(request_for())
    assert seen == []  # the core never prints, warnings included
    assert any("nim client: Model m is deprecated" in n for n in proposal.notes)
    assert KEY not in " ".join(proposal.notes)


def test_second_prompt_carries_the_first_failure():
    bad = answer(TILED_CODE.replace("acc += sA[ty][k] * sB[k][tx];", "acc += sA[ty][k] * sB[k][tx];  // ... rest"))
    chat = ScriptedChatModel([bad, answer()])
    optimizer = scripted_optimizer(chat)
    with pytest.raises(InvalidResponse) as err:
        optimizer.propose(request_for())
    failed = err.value
    assert "elided" in str(failed) and failed.response == bad and failed.prompt and failed.tokens.total_tokens > 0
    assert failed.thinking_s >= 0
    # what the graph does next: the failure becomes anti-context
    attempt = FailedAttempt(iteration=1, approach=extract_approach(bad) or "?", kind="invalid_response",
                            reason=str(failed), excerpt=str(failed))
    proposal = optimizer.propose(request_for(failed_attempts=[attempt], iteration=2))
    second_prompt = chat.calls[1][1].content
    assert "did not clear the bar" in second_prompt and str(failed) in second_prompt
    assert proposal.source == TILED_CODE


def test_cut_off_answer_says_so():
    from langchain_core.messages import AIMessage

    cut = AIMessage(content="Approach: x\n```cuda\n" + TILED_CODE[:200], response_metadata={"finish_reason": "length"})
    with pytest.raises(InvalidResponse, match="optimize.max_tokens=8192") as err:
        scripted_optimizer(ScriptedChatModel([cut]), OptimizeSettings()).propose(request_for())
    assert err.value.tokens.total_tokens == 0  # no usage reported: zeros, not a crash


def test_transient_errors_are_retried_with_exponential_backoff():
    import requests

    waits: list[float] = []
    chat = ScriptedChatModel([
        Exception("[429] Too Many Requests\nRate limit exceeded"),
        requests.exceptions.ConnectionError("connection reset by peer"),
        Exception("[503] Service Unavailable\nupstream busy"),
        TimeoutError("timed out"),
        answer(),
    ])
    settings = OptimizeSettings(llm_retries=4, llm_backoff_s=1.0, llm_backoff_max_s=3.0)
    proposal = scripted_optimizer(chat, settings, sleep=waits.append).propose(request_for())
    assert proposal.source == TILED_CODE and len(chat.calls) == 5
    assert len(waits) == 4
    assert 1.0 <= waits[0] <= 2.0 and 2.0 <= waits[1] <= 3.0 and waits[2] == waits[3] == 3.0
    assert "retried the request 4 time(s) after: HTTP 429, connection failed, HTTP 503, timeout" in proposal.notes[0]


def test_retries_give_up_with_one_clear_line():
    waits: list[float] = []
    chat = ScriptedChatModel([Exception("[502] Bad Gateway\nupstream")] * 3)
    with pytest.raises(LLMUnavailable) as err:
        scripted_optimizer(chat, sleep=waits.append, endpoint="https://integrate.api.nvidia.com/v1").propose(request_for())
    message = str(err.value)
    assert len(chat.calls) == 3 and len(waits) == 2  # llm_retries=2: three tries
    assert one_line(message) and "integrate.api.nvidia.com failed 3 time(s)" in message and "HTTP 502" in message
    assert isinstance(err.value, EnvironmentProblem)


def test_unexpected_errors_are_not_retried_or_disguised():
    chat = ScriptedChatModel([ValueError("a bug in a library"), answer()])
    with pytest.raises(ValueError, match="a bug"):
        scripted_optimizer(chat).propose(request_for())
    assert len(chat.calls) == 1


def test_unknown_model_is_a_config_error_with_a_suggestion():
    chat = ScriptedChatModel([Exception("[404] Not Found\nFunction 'abc': Not found for account 'xyz'")])
    optimizer = LLMOptimizer(lambda: chat, name="nim", model="nvidia/nemotron-nano-9b-v2", settings=FAST,
                             endpoint=DEFAULT_BASE_URL, known_models=("nvidia/nvidia-nemotron-nano-9b-v2",))
    with pytest.raises(ConfigError) as err:
        optimizer.propose(request_for())
    message = str(err.value)
    assert one_line(message) and "'nvidia/nemotron-nano-9b-v2'" in message and "exact model name" in message
    assert "did you mean 'nvidia/nvidia-nemotron-nano-9b-v2'?" in message and len(chat.calls) == 1


def test_rejected_key_is_a_config_error_that_never_shows_the_key():
    chat = ScriptedChatModel([Exception(f"[401] Unauthorized\nBearer {KEY} is not valid")])
    optimizer = scripted_optimizer(chat, api_key=SecretStr(KEY))
    with pytest.raises(ConfigError) as err:
        optimizer.propose(request_for())
    message = str(err.value)
    assert one_line(message) and "HTTP 401" in message and "NVIDIA_API_KEY" in message
    assert KEY not in message and "nvap" in message  # masked form only
    chat403 = ScriptedChatModel([Exception("[403] Forbidden\nno access")])
    with pytest.raises(ConfigError, match="has no access"):
        scripted_optimizer(chat403, api_key=SecretStr(KEY)).propose(request_for())


def test_classify_failure_knows_the_client_exception_types():
    import httpx
    import httpx2
    import openai
    import requests

    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    rate = openai.RateLimitError("rate limited", response=httpx2.Response(429, request=request), body=None)
    missing = openai.NotFoundError("nope", response=httpx2.Response(404, request=request),
                                   body={"error": {"message": "The model `x` does not exist"}})
    bad = openai.BadRequestError("bad", response=httpx2.Response(400, request=request),
                                 body={"error": {"message": "model 'x' not found, try pulling it first"}})
    too_long = openai.BadRequestError("bad", response=httpx2.Response(400, request=request),
                                      body={"error": {"message": "max_tokens is too large"}})
    cases = {
        rate: ("transient", 429), missing: ("model", 404), bad: ("model", 400), too_long: ("rejected", 400),
        openai.APITimeoutError(request=request): ("transient", None),
        openai.APIConnectionError(request=request): ("transient", None),
        httpx.ConnectError("refused"): ("transient", None), httpx2.ReadTimeout("slow"): ("transient", None),
        requests.exceptions.ReadTimeout("slow"): ("transient", None),
        requests.exceptions.SSLError("bad certificate"): ("tls", None),
        requests.exceptions.MissingSchema("no scheme"): ("url", None),
        Exception("[500] Internal Server Error\nboom"): ("transient", 500),
        Exception("[422] Unprocessable Entity\nmodel is not supported"): ("model", 422),
        Exception("BadRequestError: something odd"): ("rejected", None),
        KeyError("x"): ("unknown", None),
    }
    for exc, (kind, status) in cases.items():
        failure = classify_failure(exc)
        assert (failure.kind, failure.status) == (kind, status), (exc, failure)
    assert classify_failure(missing).detail == "The model `x` does not exist"


# -- the real clients against a fake OpenAI-compatible server -----------------------------


FACTORIES = {"nim": make_nim_optimizer, "openai": make_openai_optimizer}


def config_for(server: FakeOpenAIServer, key: str | None = KEY, model: str = "meta/llama-3.3-70b-instruct") -> LLMConfig:
    return LLMConfig(api_key=SecretStr(key) if key else None, model=model, base_url=server.base_url,
                     key_source="flag" if key else "none")


@pytest.mark.parametrize("kind", FACTORIES)
def test_client_sends_key_model_and_prompt(kind, fake_openai_server):
    server = fake_openai_server
    optimizer = FACTORIES[kind](config_for(server), FAST)
    assert server.requests == []  # constructing touches nothing
    server.script(Reply(body=chat_completion(answer(), prompt_tokens=900, completion_tokens=450)))
    proposal = optimizer.propose(request_for())
    assert [r.method for r in server.requests] == ["POST"]  # no model listing, no telemetry
    sent = server.requests[0]
    assert sent.header("Authorization") == f"Bearer {KEY}"
    body = sent.json
    assert body["model"] == "meta/llama-3.3-70b-instruct" and body["temperature"] == FAST.temperature
    assert (body.get("max_tokens") or body.get("max_completion_tokens")) == FAST.max_tokens
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][1]["content"] == proposal.prompt[1].content
    assert proposal.source == TILED_CODE and proposal.optimizer == kind
    assert (proposal.tokens.prompt_tokens, proposal.tokens.completion_tokens, proposal.tokens.total_tokens) == (900, 450, 1350)
    assert KEY not in proposal.model_dump_json()
    if kind == "nim":  # no background posts to NVIDIA's usage telemetry
        assert optimizer._chat.usage_telemetry_enabled is False


def test_client_that_refuses_its_settings_is_a_config_error():
    config = LLMConfig(api_key=SecretStr(KEY), base_url="http://127.0.0.1:9/v1/chat/completions")
    with pytest.raises(ConfigError, match="cannot set up the nim client for .*base_url must point") as err:
        make_nim_optimizer(config, FAST).propose(request_for())
    assert one_line(str(err.value))


@pytest.mark.parametrize("kind", FACTORIES)
@pytest.mark.parametrize("status", [429, 503])
def test_client_retries_a_transient_status_then_succeeds(kind, status, fake_openai_server):
    server = fake_openai_server
    server.script(Reply(status=status, body={"error": {"message": "try again"}}), Reply(body=chat_completion(answer())))
    proposal = FACTORIES[kind](config_for(server), FAST).propose(request_for())
    assert proposal.source == TILED_CODE and len(server.chat_requests) == 2 and server.pending == 0
    assert f"HTTP {status}" in proposal.notes[0]


@pytest.mark.parametrize("kind", FACTORIES)
def test_client_gives_up_after_the_configured_retries(kind, fake_openai_server):
    server = fake_openai_server
    server.script(*[Reply(status=503, body={"error": {"message": "overloaded"}})] * 3, Reply(body=chat_completion(answer())))
    with pytest.raises(LLMUnavailable) as err:
        FACTORIES[kind](config_for(server), FAST).propose(request_for())
    assert len(server.chat_requests) == FAST.llm_retries + 1 and server.pending == 1
    message = str(err.value)
    assert one_line(message) and "failed 3 time(s) in a row" in message and "HTTP 503: overloaded" in message


@pytest.mark.parametrize("kind", FACTORIES)
def test_client_404_is_one_line_about_the_model_name(kind, fake_openai_server):
    server = fake_openai_server
    server.script(Reply(status=404, body={"status": 404, "title": "Not Found", "detail": "Function not found"}))
    with pytest.raises(ConfigError) as err:
        FACTORIES[kind](config_for(server, model="meta/llama-3.3-70b-instruc"), FAST).propose(request_for())
    message = str(err.value)
    assert one_line(message) and "'meta/llama-3.3-70b-instruc'" in message and "exact model name" in message
    assert len(server.chat_requests) == 1  # not retried


@pytest.mark.parametrize("kind", FACTORIES)
def test_client_401_hides_the_key(kind, fake_openai_server):
    server = fake_openai_server
    server.script(Reply(status=401, body={"status": 401, "title": "Unauthorized", "detail": f"bad key {KEY}"}))
    with pytest.raises(ConfigError) as err:
        FACTORIES[kind](config_for(server), FAST).propose(request_for())
    assert KEY not in str(err.value) and "rejected the API key" in str(err.value) and one_line(str(err.value))


@pytest.mark.parametrize("kind", FACTORIES)
def test_client_timeout_is_retried(kind, fake_openai_server):
    server = fake_openai_server
    server.script(Reply(delay_s=1.5, body=chat_completion(answer())), Reply(body=chat_completion(answer())))
    settings = FAST.model_copy(update={"llm_timeout_s": 0.3})
    proposal = FACTORIES[kind](config_for(server), settings).propose(request_for())
    assert proposal.source == TILED_CODE and len(server.chat_requests) == 2
    assert "timeout" in proposal.notes[0]


def test_openai_client_needs_no_key_for_a_local_server(fake_openai_server):
    server = fake_openai_server
    server.script(Reply(body=chat_completion(answer())))
    make_openai_optimizer(config_for(server, key=None), FAST).propose(request_for())
    assert server.requests[0].header("Authorization") == "Bearer not-needed"


def test_nim_client_cleans_reasoning_from_a_thinking_model(fake_openai_server):
    server = fake_openai_server
    server.script(Reply(body=chat_completion("<think>tiles fit in 8 KB of shared memory</think>\n" + answer())))
    proposal = make_nim_optimizer(config_for(server), FAST).propose(request_for())
    assert proposal.source == TILED_CODE and any("reasoning" in n for n in proposal.notes)
    assert proposal.response.startswith("<think>")  # the raw answer is kept as it came


@pytest.mark.parametrize("kind", FACTORIES)
def test_hosted_endpoint_without_a_key_is_a_config_error(kind):
    config = LLMConfig(api_key=None, base_url=DEFAULT_BASE_URL)
    with pytest.raises(ConfigError) as err:
        FACTORIES[kind](config, FAST)
    assert str(err.value) == MISSING_KEY_MESSAGE


def test_no_network_at_construction_even_for_the_hosted_api(monkeypatch):
    """ChatNVIDIA lists the hosted models when it is made with a model missing from its own table
    (langchain_nvidia_ai_endpoints/_common.py, _finalize -> available_models). The optimizer makes
    it only at the first request, so constructing one opens no connection."""
    import requests

    def no_network(*args, **kwargs):
        raise AssertionError("network access at construction")

    monkeypatch.setattr(requests.Session, "request", no_network)
    config = LLMConfig(api_key=SecretStr(KEY), model="vendor/model-not-in-the-table", base_url=DEFAULT_BASE_URL)
    optimizer = make_nim_optimizer(config, FAST)
    assert optimizer.name == "nim" and optimizer.model == "vendor/model-not-in-the-table"
    assert make_openai_optimizer(config, FAST).name == "openai"
    with pytest.raises(AssertionError, match="network access"):  # made eagerly, ChatNVIDIA would call out
        optimizer._factory()


def test_chat_nvidia_makes_no_request_when_built_for_a_local_endpoint():
    """What the lazy factory relies on for local NIMs: ChatNVIDIA built against a closed port
    (any request would fail) constructs fine."""
    import socket
    import warnings

    from langchain_nvidia_ai_endpoints import ChatNVIDIA

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chat = ChatNVIDIA(model="some/unlisted-model", base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY,
                          usage_telemetry_enabled=False, timeout=1)
    assert chat.model == "some/unlisted-model"

