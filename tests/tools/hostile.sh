#!/usr/bin/env bash
# Hostile checkpoints: every malformed file must give exit code 2 and exactly
# one stderr line that names the file (or tensor) and the problem; never a
# crash, a hang or a partial output. Each case is a copy of a golden tiny
# checkpoint rewritten with the Python standard library (json, struct).
# $1 = stepmix binary, $2 = tests/data.
set -u
source "$(dirname "$0")/lib.sh" "$@"

# Builds every case folder under $tmp/<name>/ (config.json + safetensors, or
# whatever the case needs).
/usr/bin/python3 - "$golden" "$tmp" <<'PY' || { echo "FAIL: could not build the hostile cases"; exit 1; }
import copy, json, math, os, shutil, struct, sys

golden, tmp = sys.argv[1], sys.argv[2]
FP8 = os.path.join(golden, "transformer-fp8")
BF16 = os.path.join(golden, "transformer")
ST = "diffusion_pytorch_model.safetensors"
SCALE = "layers.0.self_attn.add_q_proj"  # a governed FP8 Linear of the golden checkpoint


def read_st(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), bytearray(raw[8 + n:])


def header_text(header):
    text = json.dumps(header).encode()
    return text + b" " * (-len(text) % 8)  # keeps every tensor aligned


def st_bytes(header, data, declared=None, text=None):
    text = header_text(header) if text is None else text
    return struct.pack("<Q", len(text) if declared is None else declared) + text + bytes(data)


SIZES = {"I64": 8, "F32": 4, "I32": 4, "F16": 2, "BF16": 2}


def repack(header, data):
    """Tensors laid out again end to end (largest elements first, as writers do), so that
    removing or replacing one leaves no hole in the data area (holes are refused)."""
    header = dict(header)
    meta = header.pop("__metadata__", None)
    out, packed = bytearray(), {}
    for name in sorted(header, key=lambda k: (-SIZES.get(header[k]["dtype"], 1), k)):
        begin, end = header[name]["data_offsets"]
        packed[name] = dict(header[name], data_offsets=[len(out), len(out) + end - begin])
        out.extend(data[begin:end])
    if meta is not None:
        packed["__metadata__"] = meta
    return packed, out


def append(header, data, name, dtype, shape, payload):
    data.extend(b"\0" * (-len(data) % 8))
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
    data.extend(payload)


def set_f32(header, data, name, value):
    begin = header[name]["data_offsets"][0]
    data[begin:begin + 4] = struct.pack("<f", value)


def folder(name, src=FP8, config=None, st=None):
    """A transformer folder: src's config (or `config`) and src's weights (or `st` bytes)."""
    d = os.path.join(tmp, name)
    os.makedirs(d)
    if config is None:
        shutil.copy(os.path.join(src, "config.json"), os.path.join(d, "config.json"))
    elif isinstance(config, str):
        open(os.path.join(d, "config.json"), "w").write(config)
    else:
        json.dump(config, open(os.path.join(d, "config.json"), "w"), indent=1)
    if st is None:
        shutil.copy(os.path.join(src, ST), os.path.join(d, ST))
    else:
        open(os.path.join(d, ST), "wb").write(st)
    return d


def weights_case(name, edit, src=FP8, raw=False):
    """raw: keep the offsets the edit wrote (cases about offsets); else repack."""
    header, data = read_st(os.path.join(src, ST))
    result = edit(header, data)
    if isinstance(result, (bytes, bytearray)):
        folder(name, src, st=result)
    else:
        folder(name, src, st=st_bytes(header, data) if raw else st_bytes(*repack(header, data)))


def config_case(name, edit, src=FP8):
    config = json.load(open(os.path.join(src, "config.json")))
    edit(config)
    folder(name, src, config=config)


def policy_case(name, edit):
    def outer(c):
        edit(c["quantization_config"]["runtime"]["diffusion_step_policy"], c)
    config_case(name, outer)


golden_raw = open(os.path.join(FP8, ST), "rb").read()
h0, d0 = read_st(os.path.join(FP8, ST))

# --- safetensors container -------------------------------------------------
folder("st_truncated", st=golden_raw[:200000])
folder("st_truncated_header", st=golden_raw[:4000])
folder("st_tiny", st=b"\x10\x00\x00")
folder("st_header_past_end", st=struct.pack("<Q", len(golden_raw)) + golden_raw[8:])
folder("st_header_2e62", st=struct.pack("<Q", 1 << 62) + golden_raw[8:])
folder("st_not_json", st=st_bytes(None, d0, text=b'{"norm.weight": {"dtype": "BF16", "shape": [64' + b" " * 18))
folder("st_not_object", st=st_bytes(None, b"", text=b"[1, 2, 3]       "))
folder("st_deep_json", st=st_bytes(None, b"", text=b'{"x": {"dtype": "F32", "shape": ' + b"[" * 200000 + b"]" * 200000 + b"}}"))
folder("st_number_overflow", st=st_bytes(None, b"", text=b'{"x": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 0]}}'))


def overlap(h, d):
    begin = h["layers.0.input_layernorm.weight"]["data_offsets"][0] + 64  # halfway into it
    h["norm.weight"]["data_offsets"] = [begin, begin + 128]
weights_case("st_overlap", overlap, raw=True)


def out_of_range(h, d):
    h["norm.weight"]["data_offsets"] = [len(d), len(d) + 128]
weights_case("st_out_of_range", out_of_range, raw=True)


def begin_after_end(h, d):
    h["norm.weight"]["data_offsets"] = [128, 0]
weights_case("st_begin_after_end", begin_after_end, raw=True)


def shape_span(h, d):
    h["norm.weight"]["shape"] = [65]
weights_case("st_shape_span", shape_span, raw=True)


def unknown_dtype(h, d):
    h["norm.weight"]["dtype"] = "F4"
weights_case("st_unknown_dtype", unknown_dtype)


def rank9(h, d):
    h["norm.weight"]["shape"] = [1] * 8 + [64]
weights_case("st_rank9", rank9)


def negative_dim(h, d):
    h["norm.weight"]["shape"] = [-64]
weights_case("st_negative_dim", negative_dim)


def shape_overflow(h, d):
    h["norm.weight"]["shape"] = [1 << 32, 1 << 32, 1 << 32]
weights_case("st_shape_overflow", shape_overflow)


def empty_overflow(h, d):
    # Zero bytes, but the element count of the leading dims overflows int64.
    append(h, d, "empty", "F32", [1 << 32, 1 << 31, 0], b"")
weights_case("st_empty_overflow", empty_overflow)


def duplicate(h, d):
    text = json.dumps(h)
    dup = json.dumps(h["norm.weight"])
    text = text[:-1] + ', "norm.weight": ' + dup + "}"
    t = text.encode()
    return st_bytes(None, d, text=t + b" " * (-len(t) % 8))
weights_case("st_duplicate", duplicate)

# --- FP8 Linears and their scales ------------------------------------------
for which in ("weight_scale", "input_scale"):
    for label, value in (("nan", math.nan), ("inf", math.inf), ("zero", 0.0), ("negative", -0.5)):
        weights_case(f"scale_{which}_{label}", lambda h, d, w=which, v=value: set_f32(h, d, f"{SCALE}.{w}", v))


def scale_pair(h, d):
    append(h, d, f"{SCALE}.weight_scale", "F32", [2], struct.pack("<2f", 0.01, 0.01))
weights_case("scale_shape_2", scale_pair)


def scale_f16(h, d):
    append(h, d, f"{SCALE}.input_scale", "F16", [], struct.pack("<e", 0.01))
weights_case("scale_f16", scale_f16)


def fp8_rank3(h, d):
    h[f"{SCALE}.weight"]["shape"] = [1] + h[f"{SCALE}.weight"]["shape"]
weights_case("fp8_rank3", fp8_rank3)


def fp8_rank1(h, d):
    shape = h[f"{SCALE}.weight"]["shape"]
    h[f"{SCALE}.weight"]["shape"] = [shape[0] * shape[1]]
weights_case("fp8_rank1", fp8_rank1)

weights_case("fp8_no_input_scale", lambda h, d: h.pop(f"{SCALE}.input_scale"))
weights_case("fp8_no_weight_scale", lambda h, d: h.pop(f"{SCALE}.weight_scale"))
weights_case("fp8_pre_quant_scale",
             lambda h, d: append(h, d, f"{SCALE}.pre_quant_scale", "F32", [64], struct.pack("<64f", *([1.0] * 64))))
weights_case("fp8_weight_scale_2",
             lambda h, d: append(h, d, f"{SCALE}.weight_scale_2", "F32", [], struct.pack("<f", 1.0)))
weights_case("fp8_amax", lambda h, d: append(h, d, f"{SCALE}.weight_quantizer._amax", "F32", [], struct.pack("<f", 1.0)))
def e5m2(h, d):
    h[f"{SCALE}.weight"]["dtype"] = "F8_E5M2"
    del h[f"{SCALE}.weight_scale"], h[f"{SCALE}.input_scale"]
weights_case("fp8_e5m2", e5m2)
weights_case("fp8_orphan_scale", lambda h, d: append(h, d, "proj_in.weight_scale", "F32", [], struct.pack("<f", 1.0)))

# --- config.json -------------------------------------------------------------
config_case("cfg_hidden_128", lambda c: c.update(hidden_size=128))
config_case("cfg_kv_heads_4", lambda c: c.update(num_key_value_heads=4))
config_case("cfg_layers_3", lambda c: c.update(num_hidden_layers=3))
config_case("cfg_layers_huge", lambda c: c.update(num_hidden_layers=1 << 62))
config_case("cfg_head_dim_huge", lambda c: c.update(head_dim=1 << 62, rope_axes_dim=[0, 0, 0]))
config_case("cfg_patch_overflow", lambda c: c.update(latent_patch_size=1 << 40, latent_channel=1, patch_latent_dim=1))
config_case("cfg_heads_overflow", lambda c: c.update(num_attention_heads=1 << 40, num_key_value_heads=1, head_dim=1 << 40))
config_case("cfg_margin_huge", lambda c: c.update(unified_3d_mrope_temporal_modality_margin=(1 << 63) - 1))
config_case("cfg_hidden_string", lambda c: c.update(hidden_size="64"))
folder("cfg_not_json", config='{"hidden_size": 64,')
folder("cfg_array", config="[1, 2, 3]")
folder("cfg_deep", config='{"quantization_config": ' + "[" * 300000 + "]" * 300000 + "}")
text = open(os.path.join(FP8, "config.json")).read().replace('"rope_theta": 10000.0', '"rope_theta": 1e400')
assert "1e400" in text
folder("cfg_number_overflow", config=text)
config_case("quant_nvfp4", lambda c: c["quantization_config"].update(quant_algo="NVFP4"))
config_case("quant_method_gptq", lambda c: c["quantization_config"].update(quant_method="gptq"))

# --- the step policy -----------------------------------------------------------
for label, value in (("true", True), ("float", 1.0), ("string", "1"), ("two", 2)):
    policy_case(f"policy_schema_{label}", lambda p, c, v=value: p.update(schema_version=v))
policy_case("policy_unknown_field", lambda p, c: p.update(future_knob=1))
policy_case("policy_missing_field", lambda p, c: p.pop("overlap"))
policy_case("policy_type", lambda p, c: p.update(type="every_other"))
policy_case("policy_index_space", lambda p, c: p.update(index_space="scheduler_timestep"))
policy_case("policy_default_mode", lambda p, c: p.update(default_mode="a16"))
policy_case("policy_overlap", lambda p, c: p.update(overlap="native"))
policy_case("policy_scope_empty", lambda p, c: p.update(scope=[]))
policy_case("policy_scope_vae", lambda p, c: p.update(scope=["transformer", "vae"]))
for label, value in (("negative", -1), ("float", 3.0), ("bool", True)):
    policy_case(f"policy_count_{label}", lambda p, c, v=value: p["first_steps"].update(count=v))
policy_case("policy_window_mode", lambda p, c: p["last_steps"].update(mode="native"))
policy_case("policy_reasoner", lambda p, c: p.update(reasoner="fp4"))
config_case("policy_runtime_on", lambda c: c["quantization_config"].update(runtime="on"))
config_case("policy_null", lambda c: c["quantization_config"]["runtime"].update(diffusion_step_policy=None))

# --- sharded checkpoints --------------------------------------------------------
def sharded(name, edit):
    d = folder(name)
    weight_map = {k: ST for k in h0 if k != "__metadata__"}
    edit(weight_map)
    json.dump({"metadata": {}, "weight_map": weight_map}, open(os.path.join(d, ST + ".index.json"), "w"))

sharded("index_parent", lambda m: m.update({"norm.weight": "../" + ST}))
sharded("index_absolute", lambda m: m.update({"norm.weight": "/etc/passwd.safetensors"}))
sharded("index_ghost_tensor", lambda m: m.update({"layers.9.ghost.weight": ST}))
sharded("index_missing_shard", lambda m: m.update({"norm.weight": "missing-00002.safetensors"}))
sharded("index_unlisted", lambda m: m.pop("norm.weight"))
sharded("index_not_string", lambda m: m.update({"norm.weight": 7}))
sharded("index_nul", lambda m: m.update({"norm.weight": "\u0000.safetensors"}))
# A FIFO would block open() until a writer appears.
sharded("index_fifo_shard", lambda m: m.update({"norm.weight": "fifo.safetensors"}))
os.mkfifo(os.path.join(tmp, "index_fifo_shard", "fifo.safetensors"))

# --- forward inputs ------------------------------------------------------------
inputs_h, inputs_d = read_st(os.path.join(golden, "forward", "image.safetensors"))


def inputs_case(name, edit):
    h, d = copy.deepcopy(inputs_h), bytearray(inputs_d)
    edit(h, d)
    open(os.path.join(tmp, name + ".safetensors"), "wb").write(st_bytes(*repack(h, d)))

inputs_case("inputs_und_len_huge", lambda h, d: d.__setitem__(
    slice(h["und_len"]["data_offsets"][0], h["und_len"]["data_offsets"][1]), struct.pack("<q", 1 << 62)))
inputs_case("inputs_latent_empty_overflow",
            lambda h, d: h.update(vision_latent={"dtype": "F32", "shape": [1, 4, 1 << 32, 1 << 31, 0], "data_offsets": [0, 0]}))
inputs_case("inputs_latent_zero", lambda h, d: h.update(
    vision_latent={"dtype": "F32", "shape": [1, 4, 0, 8, 8], "data_offsets": [0, 0]}))
inputs_case("inputs_no_latent", lambda h, d: h.pop("vision_latent"))
inputs_case("inputs_positions_rank", lambda h, d: h["position_ids"].update(shape=[84]))

# --- a full model directory with hostile side files -------------------------------
def model_dir(name, files):
    root = os.path.join(tmp, name)
    shutil.copytree(FP8, os.path.join(root, "transformer"))
    for rel, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        open(os.path.join(root, rel), "w").write(text)

model_dir("dir_tokenizer", {"text_tokenizer/tokenizer.json": '{"model": {"type": "Unigram", "vocab": []}}'})
model_dir("dir_tokenizer_deep", {"text_tokenizer/tokenizer.json": "[" * 300000 + "]" * 300000})
model_dir("dir_scheduler", {"scheduler/scheduler_config.json": json.dumps({
    "_class_name": "UniPCMultistepScheduler", "prediction_type": "flow_prediction", "use_flow_sigmas": True,
    "solver_order": 3})})
model_dir("dir_scheduler_fifo", {})
os.makedirs(os.path.join(tmp, "dir_scheduler_fifo", "scheduler"))
os.mkfifo(os.path.join(tmp, "dir_scheduler_fifo", "scheduler", "scheduler_config.json"))
model_dir("dir_defaults", {"model_index.json": '{"stepmix": {"height": "tall", "width": 8}}'})
model_dir("dir_defaults_huge", {"model_index.json": '{"stepmix": {"height": 1e300, "width": 8}}'})
model_dir("dir_defaults_typo", {"model_index.json": '{"stepmix": {"nun_inference_steps": 50}}'})
model_dir("dir_index_array", {"model_index.json": '[1, 2]'})
model_dir("dir_index_vae", {"model_index.json": '{"vae": ["diffusers", "AutoencoderKLWan"]}'})
model_dir("dir_index_scheduler", {"model_index.json": '{"scheduler": ["diffusers", "UniPCMultistepScheduler"]}'})
os.makedirs(os.path.join(tmp, "dir_index_scheduler", "scheduler"))  # there, but empty
model_dir("dir_vae_dangling", {})
os.symlink(os.path.join(tmp, "nowhere"), os.path.join(tmp, "dir_vae_dangling", "vae"))

# --- checkpoint content that would change the model, refused (fail closed) -------
def hole(h, d):
    d.extend(b"\0" * 8)  # bytes after the last tensor that no tensor owns
weights_case("st_hole", hole, raw=True)
weights_case("st_dtype_escape", lambda h, d: h["norm.weight"].update(dtype="\x1b[2J\x1b[31mF32"), raw=True)
weights_case("scale_weight_scale_huge", lambda h, d: set_f32(h, d, f"{SCALE}.weight_scale", 3e38))


def extra_layer(h, d):
    for name in [k for k in h if k.startswith("layers.1.")]:
        begin, end = h[name]["data_offsets"]
        append(h, d, "layers.2." + name[len("layers.1."):], h[name]["dtype"], h[name]["shape"], bytes(d[begin:end]))
weights_case("tensor_extra_layer", extra_layer)
weights_case("tensor_unknown", lambda h, d: append(h, d, "mystery.weight", "F32", [1], struct.pack("<f", 1.0)))
config_case("cfg_sound_gen", lambda c: c.update(sound_gen=True))
config_case("cfg_action_gen", lambda c: c.update(action_gen=True))
config_case("cfg_class_name", lambda c: c.update(_class_name="FluxTransformer2DModel"))
config_case("cfg_rope_yarn", lambda c: c.update(rope_scaling={"rope_type": "yarn", "factor": 4.0}))
config_case("cfg_no_hidden_size", lambda c: c.pop("hidden_size"))
config_case("cfg_null_layers", lambda c: c.update(num_hidden_layers=None))
config_case("cfg_layers_1e19", lambda c: c.update(num_hidden_layers=10 ** 19))
config_case("quant_kv_cache", lambda c: c["quantization_config"].update(kv_cache_quant_algo="FP8"))
text = open(os.path.join(FP8, "config.json")).read().replace('"hidden_size": 64,', '"hidden_size": 64, "hidden_size": 4096,')
assert text.count('"hidden_size"') == 2
folder("cfg_duplicate_key", config=text)
model_dir("dir_hf_not_json", {"hf_quant_config.json": "{not json"})
model_dir("dir_hf_nvfp4", {"hf_quant_config.json": json.dumps({"quant_method": "modelopt", "quant_algo": "NVFP4"})})
PY

# expect_rejected NAME WHERE PROBLEM ARGS... (lib.sh): exit 2, one "stepmix: "
# line on stderr naming WHERE and saying PROBLEM.
st=diffusion_pytorch_model.safetensors
scale=layers.0.self_attn.add_q_proj
# inspect CASE WHERE PROBLEM
inspect() { expect_rejected "$1" "$2" "$3" inspect "$tmp/$1"; }
forward() {
  expect_rejected "forward:$1" "$2" "$3" forward --model "$tmp/$1" --inputs "$golden/forward/image.safetensors" \
    --out "$tmp/velocity.safetensors"
  [[ ! -e $tmp/velocity.safetensors ]] || fail "forward:$1 left an output file"
}
generate() {
  expect_rejected "generate:$1" "$2" "$3" generate --model "$tmp/$1" --prompt-ids 1,2,3 --latent-shape 4,1,4,4 \
    --steps 2 --guidance 1 --save-latents "$tmp/latent.safetensors"
  [[ ! -e $tmp/latent.safetensors ]] || fail "generate:$1 left an output file"
}

# safetensors container
inspect st_truncated "$tmp/st_truncated/$st" "exceed the data area"
inspect st_truncated_header "$tmp/st_truncated_header/$st" "runs past the end of the file"
inspect st_tiny "$tmp/st_tiny/$st" "shorter than the 8-byte header length"
inspect st_header_past_end "$tmp/st_header_past_end/$st" "runs past the end of the file"
inspect st_header_2e62 "$tmp/st_header_2e62/$st" "header length 4611686018427387904 exceeds the limit"
inspect st_not_json "$tmp/st_not_json/$st" "header is not valid JSON"
inspect st_not_object "$tmp/st_not_object/$st" "header must be a JSON object"
inspect st_deep_json "$tmp/st_deep_json/$st" "nested deeper than"
inspect st_number_overflow "$tmp/st_number_overflow/$st" "header is not valid JSON"
# tensor-level problems name the file and the tensor
stt() { inspect "$1" "$tmp/$1/$st: tensor '$2'" "$3"; }
stt st_overlap norm.weight "overlap tensor 'layers.0.input_layernorm.weight'"
stt st_out_of_range norm.weight "exceed the data area"
stt st_begin_after_end norm.weight "has begin after end"
stt st_shape_span norm.weight "holds 128 bytes but BF16 [65] needs 130"
stt st_unknown_dtype norm.weight "unknown dtype 'F4'"
stt st_rank9 norm.weight "rank 9 exceeds the limit 8"
stt st_negative_dim norm.weight "expected non-negative integers"
stt st_shape_overflow norm.weight "overflows the element count"
stt st_empty_overflow empty "overflows the element count"
stt st_duplicate norm.weight "appears twice in the header"

# FP8 Linears and their scales: the transformer folder and the tensor are named
gov() { inspect "$1" "$tmp/$1: tensor '$2'" "$3"; }
for which in weight_scale input_scale; do
  for value in nan inf zero negative; do
    gov "scale_${which}_$value" "$scale.$which" "must be finite and > 0"
  done
done
gov scale_shape_2 "$scale.weight_scale" "must hold exactly one element (tensorwise scale), got shape [2]"
gov scale_f16 "$scale.input_scale" "must be F32, got F16"
gov fp8_rank3 "$scale.weight" "must be 2-D [out, in], got shape [1, 64, 64]"
gov fp8_rank1 "$scale.weight" "must be 2-D [out, in], got shape [4096]"
gov fp8_no_input_scale "$scale.weight" "'$scale.input_scale' is missing"
gov fp8_no_weight_scale "$scale.weight" "'$scale.weight_scale' is missing"
gov fp8_pre_quant_scale "$scale.pre_quant_scale" "SmoothQuant / NVFP4 scales are not supported"
gov fp8_weight_scale_2 "$scale.weight_scale_2" "SmoothQuant / NVFP4 scales are not supported"
gov fp8_amax "$scale.weight_quantizer._amax" "quantizer-state naming"
gov fp8_e5m2 "$scale.weight" "is F8_E5M2"
gov fp8_orphan_scale "proj_in.weight_scale" "is a scale without an F8_E4M3 'proj_in.weight'"
# Loading the model for a run checks the scales too.
forward scale_weight_scale_nan "$tmp/scale_weight_scale_nan: tensor '$scale.weight_scale'" "must be finite and > 0"
generate scale_input_scale_zero "$tmp/scale_input_scale_zero: tensor '$scale.input_scale'" "must be finite and > 0"
forward fp8_rank3 "$tmp/fp8_rank3: tensor '$scale.weight'" "has shape [1, 64, 64], expected [64, 64]"

# config.json: sizes that disagree with the tensors fail when the model loads.
forward cfg_hidden_128 "$tmp/cfg_hidden_128: tensor 'layers.0.input_layernorm.weight'" "has shape [64], expected [128]"
generate cfg_hidden_128 "$tmp/cfg_hidden_128: tensor 'layers.0.input_layernorm.weight'" "has shape [64], expected [128]"
forward cfg_kv_heads_4 "$tmp/cfg_kv_heads_4: tensor 'layers.0.self_attn.to_k.weight'" "has shape [32, 64], expected [64, 64]"
generate cfg_kv_heads_4 "$tmp/cfg_kv_heads_4: tensor 'layers.0.self_attn.to_k.weight'" "has shape [32, 64], expected [64, 64]"
forward cfg_layers_3 "$tmp/cfg_layers_3: missing tensor 'layers.2.input_layernorm.weight'" "expected shape [64]"
forward cfg_layers_huge "$tmp/cfg_layers_huge/config.json: num_hidden_layers" "exceeds the limit"
forward cfg_head_dim_huge "$tmp/cfg_head_dim_huge/config.json: head_dim" "exceeds the limit"
forward cfg_patch_overflow "$tmp/cfg_patch_overflow/config.json: latent_patch_size" "exceeds the limit"
forward cfg_heads_overflow "$tmp/cfg_heads_overflow/config.json: num_attention_heads" "exceeds the limit"
generate cfg_margin_huge "$tmp/cfg_margin_huge/config.json: unified_3d_mrope_temporal_modality_margin" "expected an integer in"
forward cfg_hidden_string "$tmp/cfg_hidden_string/config.json: hidden_size" "expected a positive integer, got \"64\""
inspect cfg_not_json "$tmp/cfg_not_json/config.json" "not valid JSON"
inspect cfg_array "$tmp/cfg_array/config.json" "expected a JSON object"
inspect cfg_deep "$tmp/cfg_deep/config.json" "nested deeper than"
inspect cfg_number_overflow "$tmp/cfg_number_overflow/config.json" "not valid JSON"
inspect quant_nvfp4 "$tmp/quant_nvfp4/config.json" "NVFP4 not supported"
forward quant_nvfp4 "$tmp/quant_nvfp4/config.json" "NVFP4 not supported"
inspect quant_method_gptq "$tmp/quant_method_gptq/config.json" "quantization_config.quant_method: expected \"modelopt\""

# the step policy
p=quantization_config.runtime.diffusion_step_policy
for label in true float string two; do
  inspect "policy_schema_$label" "$tmp/policy_schema_$label/config.json" "$p.schema_version: expected the integer 1"
done
inspect policy_unknown_field "$tmp/policy_unknown_field/config.json" "$p: unknown field(s) future_knob"
inspect policy_missing_field "$tmp/policy_missing_field/config.json" "$p: missing field(s) overlap"
inspect policy_type "$tmp/policy_type/config.json" "$p.type: expected \"first_last_n\""
inspect policy_index_space "$tmp/policy_index_space/config.json" "$p.index_space: expected \"denoising_loop_iteration\""
inspect policy_default_mode "$tmp/policy_default_mode/config.json" "$p.default_mode: expected \"native\""
inspect policy_overlap "$tmp/policy_overlap/config.json" "$p.overlap: expected \"a16\""
inspect policy_scope_empty "$tmp/policy_scope_empty/config.json" "$p.scope: expected a non-empty array"
inspect policy_scope_vae "$tmp/policy_scope_vae/config.json" "$p.scope: expected [\"transformer\"]"
for label in negative float bool; do
  inspect "policy_count_$label" "$tmp/policy_count_$label/config.json" "$p.first_steps.count: expected a JSON integer >= 0"
done
inspect policy_window_mode "$tmp/policy_window_mode/config.json" "$p.last_steps.mode: expected \"a16\""
inspect policy_reasoner "$tmp/policy_reasoner/config.json" "$p.reasoner: expected one of \"a16\", \"native\""
inspect policy_runtime_on "$tmp/policy_runtime_on/config.json" "quantization_config.runtime: runtime must be an object or null"
inspect policy_null "$tmp/policy_null/config.json" "$p: must be an object, got null"
generate policy_reasoner "$tmp/policy_reasoner/config.json" "$p.reasoner"

# sharded checkpoints
idx=$st.index.json
inspect index_parent "$tmp/index_parent/$idx" "'../$st' is not a *.safetensors file name in the same folder"
inspect index_absolute "$tmp/index_absolute/$idx" "is not a *.safetensors file name in the same folder"
inspect index_ghost_tensor "$tmp/index_ghost_tensor/$idx" "names tensor 'layers.9.ghost.weight' in $st, which does not hold it"
inspect index_missing_shard "$tmp/index_missing_shard/missing-00002.safetensors" "cannot open"
inspect index_unlisted "$tmp/index_unlisted/$idx" "tensor 'norm.weight'"
inspect index_not_string "$tmp/index_not_string/$idx" "weight_map.norm.weight: expected a shard file name"
inspect index_nul "$tmp/index_nul/$idx" 'weight_map.norm.weight: "\u0000.safetensors" contains a NUL character'
inspect index_fifo_shard "$tmp/index_fifo_shard/fifo.safetensors" "not a regular file"
forward index_ghost_tensor "$tmp/index_ghost_tensor/$idx" "which does not hold it"

# forward inputs
fwd_inputs() {
  expect_rejected "inputs:$1" "$2" "$3" forward --model "$golden/transformer-fp8" --inputs "$tmp/$1.safetensors" \
    --out "$tmp/velocity.safetensors"
  [[ ! -e $tmp/velocity.safetensors ]] || fail "inputs:$1 left an output file"
}
fwd_inputs inputs_und_len_huge "$tmp/inputs_und_len_huge.safetensors" "und_len must be one value equal to the 12 input_ids"
fwd_inputs inputs_latent_empty_overflow "tensor 'vision_latent'" "overflows the element count"
fwd_inputs inputs_latent_zero "latent has shape [1, 4, 0, 8, 8]" "with T, H, W >= 1"
fwd_inputs inputs_no_latent "$tmp/inputs_no_latent.safetensors" "missing tensor 'vision_latent'"
fwd_inputs inputs_positions_rank "$tmp/inputs_positions_rank.safetensors" "position_ids has shape [84], expected [3, S]"

# generate: request sizes and the model directory's side files
gen() { expect_rejected "generate:$1" "$2" "$3" generate --steps 2 --guidance 1 "${@:4}"; }
ids=(--prompt-ids 1,2,3)
fp8=$golden/transformer-fp8
gen latent_huge "latent 4,1,100000,100000" "larger than the limit of 2^28 values" --model "$fp8" "${ids[@]}" \
  --latent-shape 4,1,100000,100000
gen latent_overflow "latent 4,9223372036854775807,9223372036854775807,2" "larger than the limit" --model "$fp8" \
  "${ids[@]}" --latent-shape 4,9223372036854775807,9223372036854775807,2
gen latent_not_int "--latent-shape" "expected comma-separated integers" --model "$fp8" "${ids[@]}" \
  --latent-shape 4,1,99999999999999999999,4
gen frames_huge "--frames" "expected an integer in [1, 4097], got 2000000000" --model "$fp8" "${ids[@]}" \
  --height 2000000000 --width 2000000000 --frames 2000000000
gen tokenizer "$tmp/dir_tokenizer/text_tokenizer/tokenizer.json" "model.type: \"Unigram\" is not supported" \
  --model "$tmp/dir_tokenizer" --prompt "a boot" --latent-shape 4,1,4,4
gen tokenizer_deep "$tmp/dir_tokenizer_deep/text_tokenizer/tokenizer.json" "nested deeper than" \
  --model "$tmp/dir_tokenizer_deep" --prompt "a boot" --latent-shape 4,1,4,4
gen scheduler "$tmp/dir_scheduler/scheduler/scheduler_config.json" "solver_order: expected 1 or 2, got 3" \
  --model "$tmp/dir_scheduler" "${ids[@]}" --latent-shape 4,1,4,4
mkfifo "$tmp/noise.fifo" "$tmp/scheduler.fifo"
gen noise_fifo "$tmp/noise.fifo" "not a regular file" --model "$fp8" "${ids[@]}" --latent-shape 4,1,4,4 \
  --noise "$tmp/noise.fifo"
gen scheduler_fifo "$tmp/scheduler.fifo" "not a regular file" --model "$fp8" "${ids[@]}" --latent-shape 4,1,4,4 \
  --scheduler-config "$tmp/scheduler.fifo"
gen scheduler_dir_fifo "$tmp/dir_scheduler_fifo/scheduler/scheduler_config.json" "not a regular file" \
  --model "$tmp/dir_scheduler_fifo" "${ids[@]}" --latent-shape 4,1,4,4
gen defaults "$tmp/dir_defaults/model_index.json: stepmix.height" "expected an integer in [1, 16384]" --model "$tmp/dir_defaults" \
  "${ids[@]}"
gen defaults_huge "$tmp/dir_defaults_huge/model_index.json: stepmix.height" "expected an integer in [1, 16384], got 1e+300" \
  --model "$tmp/dir_defaults_huge" "${ids[@]}"
gen defaults_typo "$tmp/dir_defaults_typo/model_index.json: stepmix.nun_inference_steps" "no such field" \
  --model "$tmp/dir_defaults_typo" "${ids[@]}"
gen index_array "$tmp/dir_index_array/model_index.json" "expected a JSON object, got array" \
  --model "$tmp/dir_index_array" "${ids[@]}"
gen index_vae "$tmp/dir_index_vae/model_index.json: vae" "$tmp/dir_index_vae/vae/config.json does not exist" \
  --model "$tmp/dir_index_vae" "${ids[@]}"
gen index_scheduler "$tmp/dir_index_scheduler/model_index.json: scheduler" \
  "$tmp/dir_index_scheduler/scheduler/scheduler_config.json does not exist" --model "$tmp/dir_index_scheduler" "${ids[@]}"
gen vae_dangling "$tmp/dir_vae_dangling/vae" "no such file or directory" --model "$tmp/dir_vae_dangling" "${ids[@]}"
# inspect refuses what a run would (it used to pass these and exit 0).
inspect dir_scheduler "$tmp/dir_scheduler/scheduler/scheduler_config.json" "solver_order: expected 1 or 2, got 3"
inspect dir_tokenizer "$tmp/dir_tokenizer/text_tokenizer/tokenizer.json" "model.type: \"Unigram\" is not supported"
inspect dir_defaults_typo "$tmp/dir_defaults_typo/model_index.json: stepmix.nun_inference_steps" "no such field"

# checkpoint content that would change the model (accepted and ignored before)
inspect st_hole "$tmp/st_hole/$st" "(after the last tensor) belong to no tensor"
expect_rejected st_dtype_escape "tensor 'norm.weight'" "unknown dtype '\u001b[2J\u001b[31mF32'" inspect "$tmp/st_dtype_escape"
grep -q $'\x1b' "$tmp/err" && fail "st_dtype_escape: an ESC byte reached the terminal: $(cat -v "$tmp/err")"
inspect scale_weight_scale_huge "$tmp/scale_weight_scale_huge: tensor '$scale.weight_scale'" "is outside [2^-64, 2^32]"
forward scale_weight_scale_huge "$tmp/scale_weight_scale_huge: tensor '$scale.weight_scale'" "is outside [2^-64, 2^32]"
forward tensor_extra_layer "$tmp/tensor_extra_layer: 50 tensors are not used" "beyond num_hidden_layers = 2"
generate tensor_unknown "$tmp/tensor_unknown: 1 tensor is not used" "'mystery.weight'"
forward cfg_sound_gen "$tmp/cfg_sound_gen/config.json: sound_gen" "sound generation is not implemented"
generate cfg_action_gen "$tmp/cfg_action_gen/config.json: action_gen" "action generation is not implemented"
forward cfg_class_name "$tmp/cfg_class_name/config.json: _class_name" "expected \"Cosmos3OmniTransformer\""
forward cfg_rope_yarn "$tmp/cfg_rope_yarn/config.json: rope_scaling." "yarn"
forward cfg_no_hidden_size "$tmp/cfg_no_hidden_size/config.json: hidden_size" "missing; expected a positive integer"
forward cfg_null_layers "$tmp/cfg_null_layers/config.json: num_hidden_layers" "expected a positive integer, got null"
forward cfg_layers_1e19 "$tmp/cfg_layers_1e19/config.json: num_hidden_layers" "10000000000000000000 exceeds the limit"
inspect quant_kv_cache "$tmp/quant_kv_cache/config.json" "quantization_config.kv_cache_quant_algo: expected null"
inspect cfg_duplicate_key "$tmp/cfg_duplicate_key/config.json" "key \"hidden_size\" appears twice"
generate dir_hf_not_json "$tmp/dir_hf_not_json/hf_quant_config.json" "not valid JSON"
generate dir_hf_nvfp4 "$tmp/dir_hf_nvfp4/hf_quant_config.json: quant_algo" "\"NVFP4\" disagrees with"
inspect dir_hf_nvfp4 "$tmp/dir_hf_nvfp4/hf_quant_config.json: quant_algo" "\"NVFP4\" disagrees with"
expect_rejected missing_model "$tmp/no_such_model" "no such file or directory" inspect "$tmp/no_such_model"

# outputs: every writer goes through io/output_set.hpp (write_file_atomic)
out_args=(generate --model "$fp8" --prompt-ids 1,2,3 --latent-shape 4,1,4,4 --steps 2 --guidance 1)
# A private copy of /dev/null where possible (root), so that a regression
# replaces that node and not the system's; others cannot replace /dev/null.
null=/dev/null
mknod "$tmp/null" c 1 3 2>/dev/null && null=$tmp/null
expect_ok out_dev_null "trace:" "${out_args[@]}" --save-latents "$null"
[[ -c $null ]] || fail "out_dev_null: $null is no longer a character device"
mkfifo "$tmp/out.fifo"
expect_rejected out_fifo "$tmp/out.fifo: is a FIFO" "expected a regular file" "${out_args[@]}" --save-latents "$tmp/out.fifo"
mkdir "$tmp/out.dir"
expect_rejected out_dir "$tmp/out.dir: is a directory" "expected a regular file" "${out_args[@]}" --save-latents "$tmp/out.dir"
echo old >"$tmp/private.safetensors"
chmod 600 "$tmp/private.safetensors"
expect_ok out_mode "trace:" "${out_args[@]}" --save-latents "$tmp/private.safetensors"
[[ $(stat -c %a "$tmp/private.safetensors") == 600 ]] || fail "out_mode: $(stat -c %a "$tmp/private.safetensors"), expected 600"
echo precious >"$tmp/victim"
ln -s "$tmp/victim" "$tmp/link.safetensors"
expect_ok out_symlink "trace:" "${out_args[@]}" --save-latents "$tmp/link.safetensors"
[[ -L $tmp/link.safetensors ]] || fail "out_symlink: the link was replaced by a regular file"
ls "$tmp" | grep -q '\.tmp\.' && fail "a temporary output was left: $(ls "$tmp" | grep '\.tmp\.')"

finish hostile
