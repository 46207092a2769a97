package weights

import (
	"fmt"
	"strconv"
	"strings"
)

// pair is one piece of a name in the official naming and in another.
type pair struct{ official, other string }

// naming maps tensor names between the official Wan naming and another
// by pieces: whole names (exact), name prefixes outside the repeated
// blocks (top), and name pieces after a block's prefix (block), the block
// prefix itself being officialBlock+"<i>." in the official naming and
// otherBlock+"<i>." in the other.
type naming struct {
	exact, top                []pair
	officialBlock, otherBlock string
	blockExact, block         []pair
}

// cut splits "<prefix><i>.<rest>" into i and rest.
func cutBlock(name, prefix string) (i int, rest string, ok bool) {
	s, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, "", false
	}
	num, rest, ok := strings.Cut(s, ".")
	if !ok {
		return 0, "", false
	}
	i, err := strconv.Atoi(num)
	if err != nil || i < 0 || strconv.Itoa(i) != num {
		return 0, "", false
	}
	return i, rest, true
}

// convert maps name from one side to the other (toOfficial: from the
// other naming to the official one).
func (n *naming) convert(name string, toOfficial bool) (string, bool) {
	from := func(p pair) string {
		if toOfficial {
			return p.other
		}
		return p.official
	}
	to := func(p pair) string {
		if toOfficial {
			return p.official
		}
		return p.other
	}
	for _, p := range n.exact {
		if name == from(p) {
			return to(p), true
		}
	}
	fromBlock, toBlock := n.otherBlock, n.officialBlock
	if !toOfficial {
		fromBlock, toBlock = toBlock, fromBlock
	}
	if i, rest, ok := cutBlock(name, fromBlock); ok {
		pre := toBlock + strconv.Itoa(i) + "."
		for _, p := range n.blockExact {
			if rest == from(p) {
				return pre + to(p), true
			}
		}
		for _, p := range n.block {
			if r, ok := strings.CutPrefix(rest, from(p)); ok {
				return pre + to(p) + r, true
			}
		}
		return "", false
	}
	for _, p := range n.top {
		if r, ok := strings.CutPrefix(name, from(p)); ok {
			return to(p) + r, true
		}
	}
	return "", false
}

// ditDiffusers is the naming of diffusers' WanTransformer3DModel
// (scripts/convert_wan_to_diffusers.py's TRANSFORMER_KEYS_RENAME_DICT
// read backwards; diffusers' norm2 is the official norm3, the affine
// norm before cross-attention).
var ditDiffusers = &naming{
	exact: []pair{{"head.modulation", "scale_shift_table"}},
	top: []pair{
		{"patch_embedding.", "patch_embedding."},
		{"time_embedding.0.", "condition_embedder.time_embedder.linear_1."},
		{"time_embedding.2.", "condition_embedder.time_embedder.linear_2."},
		{"text_embedding.0.", "condition_embedder.text_embedder.linear_1."},
		{"text_embedding.2.", "condition_embedder.text_embedder.linear_2."},
		{"time_projection.1.", "condition_embedder.time_proj."},
		{"head.head.", "proj_out."},
	},
	officialBlock: "blocks.", otherBlock: "blocks.",
	blockExact: []pair{{"modulation", "scale_shift_table"}},
	block: []pair{
		{"self_attn.q.", "attn1.to_q."}, {"self_attn.k.", "attn1.to_k."}, {"self_attn.v.", "attn1.to_v."},
		{"self_attn.o.", "attn1.to_out.0."}, {"self_attn.norm_q.", "attn1.norm_q."}, {"self_attn.norm_k.", "attn1.norm_k."},
		{"cross_attn.q.", "attn2.to_q."}, {"cross_attn.k.", "attn2.to_k."}, {"cross_attn.v.", "attn2.to_v."},
		{"cross_attn.o.", "attn2.to_out.0."}, {"cross_attn.norm_q.", "attn2.norm_q."}, {"cross_attn.norm_k.", "attn2.norm_k."},
		{"norm3.", "norm2."},
		{"ffn.0.", "ffn.net.0.proj."}, {"ffn.2.", "ffn.net.2."},
	},
}

// t5HF is the naming of Hugging Face's UMT5EncoderModel (also ComfyUI's
// umT5 files): Wan's T5Encoder names on the left.
var t5HF = &naming{
	exact:         []pair{{"token_embedding.weight", "shared.weight"}, {"norm.weight", "encoder.final_layer_norm.weight"}},
	officialBlock: "blocks.", otherBlock: "encoder.block.",
	block: []pair{
		{"norm1.weight", "layer.0.layer_norm.weight"},
		{"attn.q.weight", "layer.0.SelfAttention.q.weight"},
		{"attn.k.weight", "layer.0.SelfAttention.k.weight"},
		{"attn.v.weight", "layer.0.SelfAttention.v.weight"},
		{"attn.o.weight", "layer.0.SelfAttention.o.weight"},
		{"pos_embedding.embedding.weight", "layer.0.SelfAttention.relative_attention_bias.weight"},
		{"norm2.weight", "layer.1.layer_norm.weight"},
		{"ffn.gate.0.weight", "layer.1.DenseReluDense.wi_0.weight"},
		{"ffn.fc1.weight", "layer.1.DenseReluDense.wi_1.weight"},
		{"ffn.fc2.weight", "layer.1.DenseReluDense.wo.weight"},
	},
}

// vaeResidual maps a residual block's pieces (official ↔ diffusers).
var vaeResidual = []pair{
	{"residual.0.gamma", "norm1.gamma"}, {"residual.2.", "conv1."}, {"residual.3.gamma", "norm2.gamma"},
	{"residual.6.", "conv2."}, {"shortcut.", "conv_shortcut."},
}

// vaeDiffusers is the naming of diffusers' AutoencoderKLWan
// (convert_wan_to_diffusers.py's convert_vae read backwards). The
// decoder's flat list decoder.upsamples.<k> becomes stages:
// decoder.up_blocks.<i>.resnets.<j> (j ≤ R) and
// decoder.up_blocks.<i>.upsamplers.0, with k = i·(R+2) + j and R+1
// residual blocks per stage (num_res_blocks = R).
type vaeDiffusers struct{ perStage int } // R+1

func mapPiece(rest string, ps []pair, toOfficial bool) (string, bool) {
	for _, p := range ps {
		from, to := p.official, p.other
		if toOfficial {
			from, to = to, from
		}
		if r, ok := strings.CutPrefix(rest, from); ok {
			return to + r, true
		}
	}
	return "", false
}

var vaeTop = []pair{
	{"conv1.", "quant_conv."}, {"conv2.", "post_quant_conv."},
	{"decoder.conv1.", "decoder.conv_in."}, {"decoder.head.0.", "decoder.norm_out."}, {"decoder.head.2.", "decoder.conv_out."},
	{"decoder.middle.1.", "decoder.mid_block.attentions.0."},
	{"encoder.conv1.", "encoder.conv_in."}, {"encoder.head.0.", "encoder.norm_out."}, {"encoder.head.2.", "encoder.conv_out."},
	{"encoder.middle.1.", "encoder.mid_block.attentions.0."},
}

func (v vaeDiffusers) toOfficial(name string) (string, bool) {
	for _, side := range []string{"decoder.", "encoder."} {
		for m, o := range map[string]string{"mid_block.resnets.0.": "middle.0.", "mid_block.resnets.1.": "middle.2."} {
			if r, ok := strings.CutPrefix(name, side+m); ok {
				if x, ok := mapPiece(r, vaeResidual, true); ok {
					return side + o + x, true
				}
				return "", false
			}
		}
	}
	if i, rest, ok := cutBlock(name, "decoder.up_blocks."); ok {
		if r, ok := strings.CutPrefix(rest, "upsamplers.0."); ok {
			return "decoder.upsamples." + strconv.Itoa(i*(v.perStage+1)+v.perStage) + "." + r, true
		}
		if j, r, ok := cutBlock(rest, "resnets."); ok && j < v.perStage {
			if x, ok := mapPiece(r, vaeResidual, true); ok {
				return "decoder.upsamples." + strconv.Itoa(i*(v.perStage+1)+j) + "." + x, true
			}
		}
		return "", false
	}
	if k, rest, ok := cutBlock(name, "encoder.down_blocks."); ok {
		if x, ok := mapPiece(rest, vaeResidual, true); ok {
			rest = x
		}
		return "encoder.downsamples." + strconv.Itoa(k) + "." + rest, true
	}
	return mapPiece(name, vaeTop, true)
}

func (v vaeDiffusers) fromOfficial(name string) (string, bool) {
	for _, side := range []string{"decoder.", "encoder."} {
		for o, m := range map[string]string{"middle.0.": "mid_block.resnets.0.", "middle.2.": "mid_block.resnets.1."} {
			if r, ok := strings.CutPrefix(name, side+o); ok {
				if x, ok := mapPiece(r, vaeResidual, false); ok {
					return side + m + x, true
				}
				return "", false
			}
		}
	}
	if k, rest, ok := cutBlock(name, "decoder.upsamples."); ok {
		i, j := k/(v.perStage+1), k%(v.perStage+1)
		if j == v.perStage {
			return fmt.Sprintf("decoder.up_blocks.%d.upsamplers.0.%s", i, rest), true
		}
		if x, ok := mapPiece(rest, vaeResidual, false); ok {
			return fmt.Sprintf("decoder.up_blocks.%d.resnets.%d.%s", i, j, x), true
		}
		return "", false
	}
	if k, rest, ok := cutBlock(name, "encoder.downsamples."); ok {
		if x, ok := mapPiece(rest, vaeResidual, false); ok {
			rest = x
		}
		return "encoder.down_blocks." + strconv.Itoa(k) + "." + rest, true
	}
	return mapPiece(name, vaeTop, false)
}

// vaeStage returns R+1, the residual blocks per decoder stage of a
// diffusers VAE: one more than the largest j of decoder.up_blocks.0.resnets.<j>.
func vaeStage(names []string) int {
	n := 0
	for _, s := range names {
		if _, rest, ok := cutBlock(s, "decoder.up_blocks."); ok {
			if j, _, ok := cutBlock(rest, "resnets."); ok && j+1 > n && j < 1<<10 {
				n = j + 1
			}
		}
	}
	return max(n, 1)
}

// vaeOfficialStage returns R+1 for official VAE names: the index of the
// first decoder resample (decoder.upsamples.<R+1>.resample.1.weight).
func vaeOfficialStage(names []string) int {
	n := 1 << 30
	for _, s := range names {
		if k, rest, ok := cutBlock(s, "decoder.upsamples."); ok && strings.HasPrefix(rest, "resample.") && k < n {
			n = k
		}
	}
	if n == 1<<30 {
		// One stage, no resample: every upsample is a residual block.
		n = 0
		for _, s := range names {
			if k, _, ok := cutBlock(s, "decoder.upsamples."); ok && k+1 > n {
				n = k + 1
			}
		}
	}
	return max(n, 1)
}
