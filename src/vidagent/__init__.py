"""vidagent: answer questions about videos with an LLM agent over a structured video memory."""

from vidagent.agent.answer import Answer, Step
from vidagent.api import ask, index
from vidagent.config import LLMSettings, Settings
from vidagent.errors import LLMError, MemoryStoreError, ModelUnavailableError, VideoError, VidagentError
from vidagent.session import Session
from vidagent.tools.base import Evidence
from vidagent.video.video import Video

__all__ = [
    "Answer", "Evidence", "LLMError", "LLMSettings", "MemoryStoreError", "ModelUnavailableError",
    "Session", "Settings", "Step", "Video", "VideoError", "VidagentError", "ask", "index",
]
__version__ = "0.1.0"
