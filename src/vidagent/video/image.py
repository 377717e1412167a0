"""Still images as question sources, and the one way to open a path that may be either kind.

``Image`` validates on opening like ``Video``: a missing file, a file that is no image, an image
with no pixels are each a ``VideoError`` naming the path. ``open_media`` picks the handle by what
the file is, not only by its name: a photo named ``.mp4`` still opens as an image.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vidagent.errors import VideoError
from vidagent.video.video import Video, existing_file, file_content_hash

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff")
MAX_IMAGE_PIXELS = 100_000_000  # larger files are refused rather than decoded into gigabytes


class Image:
    """A readable still image: its pixels (RGB uint8, H x W x 3) and content hash."""

    def __init__(self, path: str | Path) -> None:
        from PIL import Image as PILImage, UnidentifiedImageError

        self.path = existing_file(path)
        try:
            with PILImage.open(self.path) as opened:
                if opened.width * opened.height == 0:
                    raise VideoError(f"{self.path}: the image has no pixels")
                if opened.width * opened.height > MAX_IMAGE_PIXELS:
                    raise VideoError(f"{self.path}: the image is too large ({opened.width}x{opened.height})")
                pixels = np.asarray(opened.convert("RGB"), dtype=np.uint8)
        except VideoError:
            raise
        except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as error:
            raise VideoError(f"{self.path}: cannot read as an image ({type(error).__name__})") from error
        self.pixels: np.ndarray = np.ascontiguousarray(pixels)
        self.content_hash = file_content_hash(self.path)

    @property
    def width(self) -> int:
        return int(self.pixels.shape[1])

    @property
    def height(self) -> int:
        return int(self.pixels.shape[0])

    def __repr__(self) -> str:
        return f"Image({str(self.path)!r}, {self.width}x{self.height})"


def open_media(path: str | Path) -> Video | Image:
    """The file as a ``Video`` or an ``Image``; a ``VideoError`` naming the file when it is neither."""
    path = Path(path).expanduser()
    if path.suffix.lower() in IMAGE_SUFFIXES:
        return Image(path)
    try:
        return Video(path)
    except VideoError as video_error:
        if not path.is_file():
            raise
        try:
            return Image(path)
        except VideoError:
            raise VideoError(f"{path}: neither a video nor an image ({video_error.args[0].split(': ', 1)[-1]})") \
                from video_error
