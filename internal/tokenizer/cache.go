package tokenizer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// FindInCache returns the path of tokenizer.json for modelID ("org/name") at
// revision in the Hugging Face hub cache: $HF_HUB_CACHE, else $HF_HOME/hub,
// else ~/.cache/huggingface/hub. revision is a commit hash, or a branch or
// tag name that the cache's refs/ folder resolves; "" means "main".
func FindInCache(modelID, revision string) (string, error) {
	org, name, ok := strings.Cut(modelID, "/")
	if !ok || org == "" || name == "" || strings.Contains(name, "/") || strings.Contains(modelID, "..") {
		return "", fmt.Errorf("model id %q is not of the form org/name", modelID)
	}
	if revision == "" {
		revision = "main"
	}
	if strings.ContainsAny(revision, `/\`) || revision == "." || revision == ".." {
		return "", fmt.Errorf("revision %q is not a commit, branch or tag name", revision)
	}
	hub, err := hubCacheDir()
	if err != nil {
		return "", err
	}
	repo := filepath.Join(hub, "models--"+org+"--"+name)
	commit := revision
	if ref, err := os.ReadFile(filepath.Join(repo, "refs", revision)); err == nil {
		commit = strings.TrimSpace(string(ref))
	}
	path := filepath.Join(repo, "snapshots", commit, "tokenizer.json")
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("tokenizer.json of %s at revision %s is not in the Hugging Face cache (looked for %s)", modelID, revision, path)
		}
		return "", err
	}
	return path, nil
}

func hubCacheDir() (string, error) {
	if d := os.Getenv("HF_HUB_CACHE"); d != "" {
		return d, nil
	}
	if d := os.Getenv("HF_HOME"); d != "" {
		return filepath.Join(d, "hub"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("Hugging Face cache: no HF_HUB_CACHE, HF_HOME or home directory: %v", err)
	}
	return filepath.Join(home, ".cache", "huggingface", "hub"), nil
}
