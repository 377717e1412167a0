"""vidagent: answer questions about videos with an LLM agent over a structured video memory."""

from vidagent.agent.answer import Answer, Candidate
from vidagent.agent.planner import Needs, Planner, build_planner, planner_names, register_planner
from vidagent.agent.steps import Step, Trace
from vidagent.agent.task import Question, Source, Task
from vidagent.agent.toolbox import Toolbox
from vidagent.api import ask, ask_library, import_captions, index, refer_object, search
from vidagent.config import LLMSettings, Settings
from vidagent.errors import (KnowledgeError, LLMError, MemoryStoreError, ModelUnavailableError, VideoError,
                             VidagentError)
from vidagent.knowledge.spec import KnowledgeSpec
from vidagent.session import Session
from vidagent.tools.base import Evidence
from vidagent.video.video import Video

__all__ = [
    "Answer", "Candidate", "Evidence", "KnowledgeError", "KnowledgeSpec", "LLMError", "LLMSettings", "MemoryStoreError", "ModelUnavailableError",
    "Needs", "Planner", "Question", "Session", "Settings", "Source", "Step", "Task", "Toolbox", "Trace", "Video", "VideoError",
    "VidagentError", "ask", "ask_library", "build_planner", "import_captions", "index", "planner_names", "refer_object",
    "register_planner", "search",
]
__version__ = "0.1.0"
