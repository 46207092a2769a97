package rollout

import (
	"math"
	"testing"

	"github.com/densitykv/densitykv/memory"
)

// TestEveryPolicyDrivesARollout runs six blocks (past the 12-frame cache)
// of the tiny model with every memory policy and checks the latents are
// finite and the per-block logs report the attention layout.
func TestEveryPolicyDrivesARollout(t *testing.T) {
	m := goldenModel(t)
	g := openGolden(t, "rollout_native.safetensors")
	txt, err := m.EmbedText(g.F32("context"), 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range memory.Names() {
		t.Run(name, func(t *testing.T) {
			pol, err := memory.New(name, memory.Config{Layout: m.Cfg.Layout(6, 8, 3)})
			if err != nil {
				t.Fatal(err)
			}
			blocks := 0
			err = Run(m, pol, Options{Blocks: 6, Height: 6, Width: 8, Schedule: DefaultSchedule(), Noise: Seeded{Seed: 5, StepsPerBlock: 3},
				Prompts: []Prompt{{Text: txt}},
				BlockDone: func(b int, x []float32, log BlockLog) error {
					blocks++
					for i, v := range x {
						if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
							t.Fatalf("block %d: latent %d is %v", b, i, v)
						}
					}
					if len(log.Attention) != 2 || log.Attention[0].Total() < 36 || log.Policy != pol.Name() {
						t.Fatalf("block %d log %+v", b, log)
					}
					return nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			if blocks != 6 {
				t.Fatalf("%d blocks", blocks)
			}
		})
	}
}
