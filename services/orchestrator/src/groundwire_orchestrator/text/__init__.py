"""Text the stages share but that is no stage: sentences and words, quotes, prompts, the
citation numbering and passage vectors."""
