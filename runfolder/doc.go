// Package runfolder writes and reads densitykv's run folders
// (<out>/<name>/, see the README): the memory log, provenance, admissions,
// storage and summary files, the figures drawn from them, the resume
// checkpoints, ownership and the checks of a folder against its records.
// It is the folder's format: the jobs that fill one live elsewhere (the
// generate job in package generate: Generate, GenerateList, Decode, and
// CollectJob, a list's report; the simulate job in package sim; the eval job
// in package eval) and reach the format through this package. A run
// reports what it does through Hooks and leaves printing to its caller.
//
// Resuming: a run saves a checkpoint (state/checkpoint.json, sealed with
// the SHA-256 of its state, written last and atomically: it is the commit
// point) and the policy snapshots it names, every Config.Run.SnapshotEvery
// blocks and when stopped; the files written as it goes (memory log,
// latent shards, recorded stream) are cut back to the checkpoint's sizes
// on resume, so a resumed run ends with the files an uninterrupted one
// writes.
package runfolder
