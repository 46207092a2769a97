package runinput

import (
	"fmt"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/ragae"
)

// CheckRAGAE reads the LongLive-RAG autoencoder a resolved generate
// configuration names (generate.rag_ae), so that a bad file stops the run
// before its folder is made (errors name the file and tensor), checks that
// it reads the model's latents, and records the descriptor size it yields
// (memory.longlive_rag.descriptor_storage_dim) unless the configuration
// gives one. Without generate.rag_ae it does nothing.
func CheckRAGAE(gc *config.GenerateConfig) error {
	G := &gc.Generate
	if G.RAGAE == "" {
		return nil
	}
	ae, err := ragae.Load(G.RAGAE)
	if err != nil {
		return fmt.Errorf("--rag-ae: %w", err)
	}
	r := &gc.Memory.LongLiveRAG
	if _, err := ae.ForLatent(r.LatentChannels, G.LatentHeight, G.LatentWidth); err != nil {
		return fmt.Errorf("--rag-ae: %w", err)
	}
	if r.DescriptorStorageDim == 0 {
		r.DescriptorStorageDim = ae.Config.LatentDim
	}
	return nil
}
