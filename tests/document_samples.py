"""Real sample files of every supported format, generated with the libraries that read them.

Nothing binary is committed: each function builds its file (python-docx, python-pptx,
openpyxl and EbookLib write what they read; fpdf2 writes PDFs).  Each file states facts the
pattern extractor finds, in its natural units (sections, slides, sheets, chapters), so a test
can check both the extracted edges and the page label of their source chain.
"""

from __future__ import annotations

import io

#: A page with boilerplate around its main content; two sections start at ``h2`` headings.
HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Computing pioneers</title>
<style>body { font-family: serif; }</style><script>var tracker = "Grace Hopper invented tracking.";</script>
</head><body>
<nav><ul><li><a href="/">Home</a></li><li><a href="/shop">Shop</a></li><li>Subscribe to the newsletter</li></ul></nav>
<header><p>Science Weekly: the magazine of the curious. Cookie settings.</p></header>
<main><article>
<h1>Computing pioneers</h1>
<p>The history of computing starts long before electronics, with mechanical engines.</p>
<h2>Babbage</h2>
<p>Charles Babbage designed the <a href="/ae">Analytical Engine</a> in 1837. The engine used punched cards.</p>
<h2>Lovelace</h2>
<p>Ada Lovelace wrote the first published algorithm. Ada Lovelace worked with Charles Babbage.</p>
<table><tr><th>Name</th><th>Born</th></tr><tr><td>Ada Lovelace</td><td>1815</td></tr></table>
</article></main>
<footer><p>Copyright Science Weekly. All rights reserved. Privacy policy. Terms of use.</p></footer>
</body></html>
"""

#: Text only boilerplate holds; a test checks it never reaches a page.
HTML_BOILERPLATE = ("Subscribe to the newsletter", "Cookie settings", "All rights reserved", "Grace Hopper")


def html() -> bytes:
    return HTML.encode("utf-8")


def docx() -> bytes:
    """A Word document: a title, two Heading 1 sections and a table."""
    import docx as python_docx

    document = python_docx.Document()
    document.add_heading("Structural biology", level=0)
    document.add_paragraph("Crystallography reveals the shapes of molecules.")
    document.add_heading("Franklin", level=1)
    document.add_paragraph("Rosalind Franklin photographed DNA in 1952. Rosalind Franklin worked at King's College.")
    document.add_heading("Hodgkin", level=1)
    document.add_paragraph("Dorothy Hodgkin discovered the structure of penicillin.")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Molecule", "Year"
    table.cell(1, 0).text, table.cell(1, 1).text = "penicillin", "1945"
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def pptx() -> bytes:
    """A presentation of three slides with titles, bullet text and speaker notes; the second is about Hubble."""
    from pptx import Presentation

    deck = Presentation()
    slides = [("Astronomy", "A short history of the expanding universe."),
              ("Hubble", "Edwin Hubble discovered the expansion of the universe."),
              ("Leavitt", "Henrietta Leavitt discovered the period-luminosity relation.")]
    for title, body in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
        slide.notes_slide.notes_text_frame.text = f"Speaker notes about {title}."
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def xlsx() -> bytes:
    """A workbook of two worksheets: ``Elements`` and ``Discoverers``."""
    from openpyxl import Workbook

    workbook = Workbook()
    sheet = workbook.active
    sheet.title = "Elements"
    for row in (("Element", "Symbol", "Number"), ("Helium", "He", 2), ("Neon", "Ne", 10)):
        sheet.append(row)
    other = workbook.create_sheet("Discoverers")
    other.append(["Statement"])
    other.append(["William Ramsay discovered neon."])
    other.append(["Pierre Janssen discovered helium."])
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def csv() -> bytes:
    rows = ["name,discovery,year", "Marie Curie,polonium,1898", "Marie Curie,radium,1898",
            "Ernest Rutherford,proton,1917", "James Chadwick,neutron,1932", "Carl Anderson,positron,1932"]
    return ("\n".join(rows) + "\n").encode("utf-8")


def epub() -> bytes:
    """An e-book of two chapters (and a table of contents, which is not a chapter)."""
    from ebooklib import epub as book_lib

    book = book_lib.EpubBook()
    book.set_identifier("tg-test-book")
    book.set_title("Chemists")
    book.set_language("en")
    chapters = []
    for i, (title, text) in enumerate([
            ("Mendeleev", "Dmitri Mendeleev published the periodic table in 1869."),
            ("Meitner", "Lise Meitner explained nuclear fission. Lise Meitner worked in Berlin.")], 1):
        chapter = book_lib.EpubHtml(title=title, file_name=f"chapter{i}.xhtml", lang="en")
        chapter.content = f"<html><body><h1>{title}</h1><p>{text}</p></body></html>"
        book.add_item(chapter)
        chapters.append(chapter)
    book.toc = chapters
    book.add_item(book_lib.EpubNcx())
    book.add_item(book_lib.EpubNav())
    book.spine = ["nav", *chapters]
    out = io.BytesIO()
    book_lib.write_epub(out, book)
    return out.getvalue()


def pdf(pages: list[str]) -> bytes:
    """A PDF with one page per text."""
    from fpdf import FPDF

    document = FPDF()
    document.set_font("Helvetica", size=11)
    for text in pages:
        document.add_page()
        if text:
            document.multi_cell(0, 6, text)
    return bytes(document.output())


def latin1_text() -> bytes:
    """Plain text in ISO-8859-1 (not UTF-8): its encoding is detected."""
    return ("Marie Curie était une physicienne. Elle a découvert le polonium à Paris.\n"
            "Pierre Curie discovered piezoelectricity. Les élèves étudiaient la radioactivité.\n").encode("latin-1")


#: File name, bytes-maker and kind of every format, for tests that go over all of them.
ALL = {
    "pioneers.html": (html, "text/html"),
    "biology.docx": (docx, "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
    "astronomy.pptx": (pptx, "application/vnd.openxmlformats-officedocument.presentationml.presentation"),
    "elements.xlsx": (xlsx, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
    "discoveries.csv": (csv, "text/csv"),
    "chemists.epub": (epub, "application/epub+zip"),
}
