import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.rpc import status_pb2 as _status_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PixelLayout(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PIXEL_LAYOUT_UNSPECIFIED: _ClassVar[PixelLayout]
    PIXEL_LAYOUT_GRAY8: _ClassVar[PixelLayout]
    PIXEL_LAYOUT_GRAY16: _ClassVar[PixelLayout]
    PIXEL_LAYOUT_GRAY_ALPHA8: _ClassVar[PixelLayout]
    PIXEL_LAYOUT_RGB8: _ClassVar[PixelLayout]
    PIXEL_LAYOUT_BGR8: _ClassVar[PixelLayout]
    PIXEL_LAYOUT_RGBA8: _ClassVar[PixelLayout]
    PIXEL_LAYOUT_BGRA8: _ClassVar[PixelLayout]

class LimitType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LIMIT_TYPE_UNSPECIFIED: _ClassVar[LimitType]
    LIMIT_TYPE_MIN: _ClassVar[LimitType]
    LIMIT_TYPE_MAX: _ClassVar[LimitType]

class ScoreMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCORE_MODE_UNSPECIFIED: _ClassVar[ScoreMode]
    SCORE_MODE_FAST: _ClassVar[ScoreMode]
    SCORE_MODE_SLOW: _ClassVar[ScoreMode]
PIXEL_LAYOUT_UNSPECIFIED: PixelLayout
PIXEL_LAYOUT_GRAY8: PixelLayout
PIXEL_LAYOUT_GRAY16: PixelLayout
PIXEL_LAYOUT_GRAY_ALPHA8: PixelLayout
PIXEL_LAYOUT_RGB8: PixelLayout
PIXEL_LAYOUT_BGR8: PixelLayout
PIXEL_LAYOUT_RGBA8: PixelLayout
PIXEL_LAYOUT_BGRA8: PixelLayout
LIMIT_TYPE_UNSPECIFIED: LimitType
LIMIT_TYPE_MIN: LimitType
LIMIT_TYPE_MAX: LimitType
SCORE_MODE_UNSPECIFIED: ScoreMode
SCORE_MODE_FAST: ScoreMode
SCORE_MODE_SLOW: ScoreMode

class RecognizeRequest(_message.Message):
    __slots__ = ("request_id", "encoded", "raw", "options")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ENCODED_FIELD_NUMBER: _ClassVar[int]
    RAW_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    encoded: bytes
    raw: RawImage
    options: Options
    def __init__(self, request_id: _Optional[str] = ..., encoded: _Optional[bytes] = ..., raw: _Optional[_Union[RawImage, _Mapping]] = ..., options: _Optional[_Union[Options, _Mapping]] = ...) -> None: ...

class RawImage(_message.Message):
    __slots__ = ("data", "height", "width", "layout")
    DATA_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    height: int
    width: int
    layout: PixelLayout
    def __init__(self, data: _Optional[bytes] = ..., height: _Optional[int] = ..., width: _Optional[int] = ..., layout: _Optional[_Union[PixelLayout, str]] = ...) -> None: ...

class Options(_message.Message):
    __slots__ = ("use_det", "use_cls", "use_rec", "return_word_box", "text_score", "det_thresh", "box_thresh", "unclip_ratio", "cls_thresh", "limit_side_len", "limit_type", "use_dilation", "score_mode", "max_side_len", "apply_exif", "plugins", "use_doc_orientation", "doc_orientation_thresh")
    USE_DET_FIELD_NUMBER: _ClassVar[int]
    USE_CLS_FIELD_NUMBER: _ClassVar[int]
    USE_REC_FIELD_NUMBER: _ClassVar[int]
    RETURN_WORD_BOX_FIELD_NUMBER: _ClassVar[int]
    TEXT_SCORE_FIELD_NUMBER: _ClassVar[int]
    DET_THRESH_FIELD_NUMBER: _ClassVar[int]
    BOX_THRESH_FIELD_NUMBER: _ClassVar[int]
    UNCLIP_RATIO_FIELD_NUMBER: _ClassVar[int]
    CLS_THRESH_FIELD_NUMBER: _ClassVar[int]
    LIMIT_SIDE_LEN_FIELD_NUMBER: _ClassVar[int]
    LIMIT_TYPE_FIELD_NUMBER: _ClassVar[int]
    USE_DILATION_FIELD_NUMBER: _ClassVar[int]
    SCORE_MODE_FIELD_NUMBER: _ClassVar[int]
    MAX_SIDE_LEN_FIELD_NUMBER: _ClassVar[int]
    APPLY_EXIF_FIELD_NUMBER: _ClassVar[int]
    PLUGINS_FIELD_NUMBER: _ClassVar[int]
    USE_DOC_ORIENTATION_FIELD_NUMBER: _ClassVar[int]
    DOC_ORIENTATION_THRESH_FIELD_NUMBER: _ClassVar[int]
    use_det: bool
    use_cls: bool
    use_rec: bool
    return_word_box: bool
    text_score: float
    det_thresh: float
    box_thresh: float
    unclip_ratio: float
    cls_thresh: float
    limit_side_len: int
    limit_type: LimitType
    use_dilation: bool
    score_mode: ScoreMode
    max_side_len: int
    apply_exif: bool
    plugins: PluginSelection
    use_doc_orientation: bool
    doc_orientation_thresh: float
    def __init__(self, use_det: _Optional[bool] = ..., use_cls: _Optional[bool] = ..., use_rec: _Optional[bool] = ..., return_word_box: _Optional[bool] = ..., text_score: _Optional[float] = ..., det_thresh: _Optional[float] = ..., box_thresh: _Optional[float] = ..., unclip_ratio: _Optional[float] = ..., cls_thresh: _Optional[float] = ..., limit_side_len: _Optional[int] = ..., limit_type: _Optional[_Union[LimitType, str]] = ..., use_dilation: _Optional[bool] = ..., score_mode: _Optional[_Union[ScoreMode, str]] = ..., max_side_len: _Optional[int] = ..., apply_exif: _Optional[bool] = ..., plugins: _Optional[_Union[PluginSelection, _Mapping]] = ..., use_doc_orientation: _Optional[bool] = ..., doc_orientation_thresh: _Optional[float] = ...) -> None: ...

class PluginSelection(_message.Message):
    __slots__ = ("names", "options")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    options: _struct_pb2.Struct
    def __init__(self, names: _Optional[_Iterable[str]] = ..., options: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class RecognizeResponse(_message.Message):
    __slots__ = ("request_id", "lines", "fields", "plugin_errors", "timings", "model_version", "device", "image_width", "image_height", "page_angle")
    class TimingsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _duration_pb2.Duration
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_ERRORS_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    IMAGE_WIDTH_FIELD_NUMBER: _ClassVar[int]
    IMAGE_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    PAGE_ANGLE_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    lines: _containers.RepeatedCompositeFieldContainer[Line]
    fields: _struct_pb2.Struct
    plugin_errors: _containers.RepeatedCompositeFieldContainer[PluginError]
    timings: _containers.MessageMap[str, _duration_pb2.Duration]
    model_version: str
    device: str
    image_width: int
    image_height: int
    page_angle: int
    def __init__(self, request_id: _Optional[str] = ..., lines: _Optional[_Iterable[_Union[Line, _Mapping]]] = ..., fields: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., plugin_errors: _Optional[_Iterable[_Union[PluginError, _Mapping]]] = ..., timings: _Optional[_Mapping[str, _duration_pb2.Duration]] = ..., model_version: _Optional[str] = ..., device: _Optional[str] = ..., image_width: _Optional[int] = ..., image_height: _Optional[int] = ..., page_angle: _Optional[int] = ...) -> None: ...

class RecognizeStreamRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: RecognizeRequest
    def __init__(self, request: _Optional[_Union[RecognizeRequest, _Mapping]] = ...) -> None: ...

class RecognizeStreamResponse(_message.Message):
    __slots__ = ("request_id", "response", "error")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    response: RecognizeResponse
    error: _status_pb2.Status
    def __init__(self, request_id: _Optional[str] = ..., response: _Optional[_Union[RecognizeResponse, _Mapping]] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ...) -> None: ...

class Line(_message.Message):
    __slots__ = ("text", "score", "box", "angle", "chars")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    BOX_FIELD_NUMBER: _ClassVar[int]
    ANGLE_FIELD_NUMBER: _ClassVar[int]
    CHARS_FIELD_NUMBER: _ClassVar[int]
    text: str
    score: float
    box: _containers.RepeatedCompositeFieldContainer[Point]
    angle: int
    chars: _containers.RepeatedCompositeFieldContainer[CharBox]
    def __init__(self, text: _Optional[str] = ..., score: _Optional[float] = ..., box: _Optional[_Iterable[_Union[Point, _Mapping]]] = ..., angle: _Optional[int] = ..., chars: _Optional[_Iterable[_Union[CharBox, _Mapping]]] = ...) -> None: ...

class Point(_message.Message):
    __slots__ = ("x", "y")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    x: float
    y: float
    def __init__(self, x: _Optional[float] = ..., y: _Optional[float] = ...) -> None: ...

class CharBox(_message.Message):
    __slots__ = ("text", "box", "score")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    BOX_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    text: str
    box: _containers.RepeatedCompositeFieldContainer[Point]
    score: float
    def __init__(self, text: _Optional[str] = ..., box: _Optional[_Iterable[_Union[Point, _Mapping]]] = ..., score: _Optional[float] = ...) -> None: ...

class PluginError(_message.Message):
    __slots__ = ("plugin", "error")
    PLUGIN_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    plugin: str
    error: str
    def __init__(self, plugin: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...
