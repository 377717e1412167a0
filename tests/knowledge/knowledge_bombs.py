"""Knowledge files made to cost their reading as much as possible, small on disk (issue 55): a workbook whose sheet
XML inflates hundreds of times, a workbook whose one far cell pads every row to thousands of columns, a PDF whose
pages all draw one long shared content stream."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

from openpyxl import Workbook


def inflating_workbook(path: Path, *, rows: int, cells_per_row: int = 10) -> Path:
    """A workbook whose one sheet holds ``rows`` rows of ``cells_per_row`` numbers, its XML written straight into
    the zip (openpyxl would take minutes): ~25 bytes of XML a cell, which compresses hundreds of times."""
    Workbook().save(path)  # the workbook's other parts, then its sheet replaced
    with zipfile.ZipFile(path) as source:
        parts = {name: source.read(name) for name in source.namelist()}
    sheet = "xl/worksheets/sheet1.xml"
    head, _, tail = re.split(r"(<sheetData\s*/>|<sheetData></sheetData>)", parts[sheet].decode(), maxsplit=1)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as target:
        for name, data in parts.items():
            if name != sheet:
                target.writestr(name, data)
        with target.open(sheet, "w", force_zip64=True) as member:
            last = f"{_column(cells_per_row - 1)}{rows}"  # the sheet declares its extent, as Excel writes it
            member.write((re.sub(r'<dimension ref="[^"]*"', f'<dimension ref="A1:{last}"', head) +
                          "<sheetData>").encode())
            cells = "".join(f'<c t="n"><v>{column}</v></c>' for column in range(cells_per_row))
            for start in range(1, rows + 1, 1000):
                member.write("".join(f'<row r="{number}">{cells}</row>'
                                     for number in range(start, min(rows, start + 999) + 1)).encode())
            member.write(("</sheetData>" + tail).encode())
    return path


def far_cell_workbook(path: Path, *, rows: int = 200) -> Path:
    """A small workbook with a header and ``rows`` rows in column A, and one value in column XFD (16,384): read
    row by row, every row is padded to 16,384 cells."""
    book = Workbook()
    sheet = book.active
    sheet.append(["name"])
    for index in range(rows):
        sheet.append([f"row {index}"])
    sheet["XFD1"] = "far"
    book.save(path)
    return path


def shared_stream_pdf(path: Path, *, pages: int = 10, stream_bytes: int = 6_300_000) -> Path:
    """A PDF of ``pages`` pages that all draw one content stream of ``stream_bytes`` bytes of text operators,
    compressed (tens of KB on disk)."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    font = writer._add_object(DictionaryObject({NameObject("/Type"): NameObject("/Font"),
                                                NameObject("/Subtype"): NameObject("/Type1"),
                                                NameObject("/BaseFont"): NameObject("/Helvetica")}))
    line = b"BT /F1 9 Tf 10 10 Td (all work and no play) Tj ET\n"
    stream = DecodedStreamObject()
    stream.set_data(line * (stream_bytes // len(line)))
    shared = writer._add_object(stream.flate_encode())
    for _ in range(pages):
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Contents")] = shared
        page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): DictionaryObject(
            {NameObject("/F1"): font})})
    with path.open("wb") as handle:
        writer.write(handle)
    return path


def _column(index: int) -> str:
    """A spreadsheet column's letters (0: A, 26: AA)."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(ord("A") + rest) + letters
    return letters
