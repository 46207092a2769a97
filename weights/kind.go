package weights

// Kind is the part of Wan2.1 a set of weights holds.
type Kind uint8

const (
	// Unknown is none of the parts densitykv reads.
	Unknown Kind = iota
	// DiT is the (causal) Wan2.1 diffusion transformer: --checkpoint.
	DiT
	// VAE is the Wan2.1 VAE (its decoder is used): --vae.
	VAE
	// TextEncoder is the umT5-XXL encoder: --text-encoder.
	TextEncoder
	// LoRA is a set of low-rank adapters of the DiT: --lora.
	LoRA
	// Tokenizer is umT5's SentencePiece tokenizer: --tokenizer.
	Tokenizer
)

// String names the kind in messages ("DiT", "VAE", "text encoder", …).
func (k Kind) String() string {
	switch k {
	case DiT:
		return "Wan DiT"
	case VAE:
		return "Wan VAE"
	case TextEncoder:
		return "umT5 text encoder"
	case LoRA:
		return "LoRA"
	case Tokenizer:
		return "tokenizer"
	}
	return "unknown"
}

// Flag is the command-line flag that takes the kind's weights.
func (k Kind) Flag() string {
	switch k {
	case DiT:
		return "--checkpoint"
	case VAE:
		return "--vae"
	case TextEncoder:
		return "--text-encoder"
	case LoRA:
		return "--lora"
	case Tokenizer:
		return "--tokenizer"
	}
	return ""
}

// Component is the sub-folder of a diffusers model folder
// (model_index.json) that holds the kind ("" for LoRA).
func (k Kind) Component() string {
	switch k {
	case DiT:
		return "transformer"
	case VAE:
		return "vae"
	case TextEncoder:
		return "text_encoder"
	case Tokenizer:
		return "tokenizer"
	}
	return ""
}
