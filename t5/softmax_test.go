package t5

import "github.com/densitykv/densitykv/nn"

// softmaxRow is the softmax of the encoder's attention rows
// (nn.SoftmaxBiasRow, which compute.Backend.BiasedAttention runs),
// pinned by TestSoftmaxRow.
var softmaxRow = nn.SoftmaxBiasRow
