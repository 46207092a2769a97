// Package vbench is the bridge between densitykv's prompt lists and VBench
// (Vchitect/VBench), the benchmark the paper's tables come from, in both
// directions: Export lays a set of runs' videos out as VBench-Long's
// custom-input evaluation reads them, and Table turns VBench's result files
// back into the paper's tables.
//
// # The protocol (paper, "Metrics" and supplementary "Experimental Details")
//
// The paper follows LongLive-RAG's VBench-Long reporting protocol with six
// of VBench's 16 dimensions, higher better for all six, in this column
// order: Subject Consistency, Background Consistency, Motion Smoothness,
// Dynamic Degree, Aesthetic Quality, Imaging Quality (Dimensions). A cell's
// value is VBench's score of the dimension times 100, shown with two
// decimals.
//
//   - Main table (Table "Comparison across backbones"): per horizon (30,
//     60, 120 s) and backbone, every method's six values; "ranks use the
//     displayed two-decimal values with midranks for ties"; a row's
//     Avg. Rank averages its six ranks; "the overall value spans all 54
//     backbone–horizon–metric cells". Bold and underline mark the best and
//     second-best displayed values of a column within the group (the best
//     and second-best distinct values: a tie shares the mark).
//   - Single-metric wins (Figure "Single-metric wins"): the number of
//     backbone–metric cells per horizon whose best displayed value a method
//     holds ("31 of 54 wins"). A cell whose best value is shared counts as a
//     win for each method sharing it; the tables say how many cells were
//     shared.
//   - Ablations (Table "Parameter sensitivity and policy ablations"): the
//     16-prompt subset at 60 s; each value is the unweighted mean over the
//     three backbones; Avg. Rank "averages competition ranks over the six
//     displayed means, with ties ranked as 1, 1, 3, within the three
//     settings of each parameter sweep, the seven policy variants, or the
//     four geometry variants".
//
// Avg. Ranks are rounded to two decimals exactly (half up, in rational
// arithmetic: a rank sum over n cells is never a float sum). The paper's
// printed ablation rows (e.g. p = 1, 2, 4: 1.83, 1.17, 2.83 with a
// three-way tie at 97.19) are reproduced by the tests.
//
// # Export (VBench's custom input)
//
// VBench names a video {prompt}-{index}.mp4 and recovers the prompt by
// removing the "-{index}" suffix (vbench/utils.py get_prompt_from_filename);
// prompts longer than a file name allows are cut to their first 180
// characters (VBench-2.0's prompt[:180], prompts/README.md). VBench-Long
// (vbench2_beta_long, the evaluation for videos of 5 s and longer) cuts
// each video into 2 s clips named {stem}_{NNN}.mp4 under
// {videos_path}/split_clip/{stem}/ and groups clip scores back by the text
// before the first "_" of the clip's name (reorganize_clips_results), and
// names the clip folder by the text before the first ".mp4" of the video's
// name. So an exported name is the trimmed prompt with "/", "\", "_" and
// control characters replaced by spaces and ".mp4" written " mp4", cut to
// 180 characters and to what leaves the clip names within 255 bytes, plus
// "-{k}.mp4", k counting videos of equal names in the folder (0 unless two
// prompts share their first 180 characters). The prompt map VBench's
// --prompt_file reads ({"file": "full prompt"}) is written beside the
// videos; the manifest records which run, prompt index, policy, backbone,
// seed and horizon each file came from.
//
// The commands (vbench.sh) are VBench-Long's documented custom-input
// invocation (vbench2_beta_long/README.md, "Evaluation on Your Own
// Videos"): eval_long.py --mode long_custom_input --dev_flag with the six
// dimensions, one call per exported folder, each writing
// results_<time>_eval_results.json ({dimension: [score, per-video
// results, …]}) into its own results folder.
//
// Files are written through internal/atomicfile; the export is assembled
// in a temporary folder and renamed into place, so a failed export leaves
// no partial folder and an earlier export unchanged.
package vbench
