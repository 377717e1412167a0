"""The build stages of a video's memory, one module each.

Frame stages (``frames``, ``objects``) look at sampled frames: the builder decodes the union of
their sample times once and hands each stage its frames in chunks, checkpointing every chunk so a
killed build resumes. Table stages (``speech``, ``segments``) work from audio or stored rows.
"""
