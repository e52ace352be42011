"""SwapOS: a pipeline-aware runtime for multi-model local LLM pipelines.

The public API is exactly what this module re-exports (a test keeps it so).
"""

from swapos.actors.prefetcher import PrefetchPolicy as PrefetchPolicy
from swapos.actors.system import PhasesOutcome as PhasesOutcome
from swapos.actors.system import System as System
from swapos.actors.system import SystemStatistics as SystemStatistics
from swapos.actors.system import TaskOutcome as TaskOutcome
from swapos.actors.system import open_system as open_system
from swapos.backends.base import GenerationOutput as GenerationOutput
from swapos.backends.base import LoadedModel as LoadedModel
from swapos.backends.base import ModelBackend as ModelBackend
from swapos.clock import Clock as Clock
from swapos.clock import MonotonicClock as MonotonicClock
from swapos.data.generation import GenerationStats as GenerationStats
from swapos.data.residency import ModelState as ModelState
from swapos.data.sampling import SamplingParams as SamplingParams
from swapos.data.task import Task as Task
from swapos.errors import CapsuleError as CapsuleError
from swapos.errors import EventLogError as EventLogError
from swapos.errors import GenerationError as GenerationError
from swapos.errors import ModelFileError as ModelFileError
from swapos.errors import ProfileError as ProfileError
from swapos.errors import SwapOSError as SwapOSError
from swapos.errors import SystemClosedError as SystemClosedError
from swapos.errors import TaskError as TaskError
from swapos.errors import TemplateError as TemplateError
from swapos.messages.commands import ModelsUnloaded as ModelsUnloaded
from swapos.messages.commands import PhaseSpec as PhaseSpec
from swapos.messages.events import EVENT_DECODER as EVENT_DECODER
from swapos.messages.events import AnyEvent as AnyEvent
from swapos.models.bundled import default_profile as default_profile
from swapos.models.profile import MODES as MODES
from swapos.models.profile import Profile as Profile
from swapos.models.profile import decode_profile as decode_profile
from swapos.models.profile import load_profile as load_profile
from swapos.models.spec import ModelSpec as ModelSpec
from swapos.models.templates import ChatFormat as ChatFormat
from swapos.pipeline.tasks import load_suite as load_suite
from swapos.pipeline.tasks import load_task as load_task
from swapos.records.schema import PhaseRecord as PhaseRecord
from swapos.records.schema import RunSummary as RunSummary
from swapos.records.schema import TaskResult as TaskResult
from swapos.version import __version__ as __version__
